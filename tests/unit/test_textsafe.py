

def test_report_width(monkeypatch):
    import sys

    from gputrace.textsafe import report_width

    class Out:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    monkeypatch.setattr(sys, "stdout", Out(False))
    monkeypatch.delenv("COLUMNS", raising=False)
    assert report_width() == 160 and report_width(120) == 120
    monkeypatch.setenv("COLUMNS", "88")
    assert report_width() == 88
    for bad in ("0", "-5", "x", ""):
        monkeypatch.setenv("COLUMNS", bad)
        assert report_width() == 160
    monkeypatch.setattr(sys, "stdout", Out(True))
    monkeypatch.setenv("COLUMNS", "88")
    assert report_width() is None  # a terminal: rich measures it
