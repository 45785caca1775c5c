"""R1CS constraint-system builder and evaluator (the ``synthesis`` phase's data structure).

Variables are ints: 0 is the constant ONE, then the public inputs (allocated first), then the
private witnesses. A linear combination (LC) is a sequence of ``(variable, coefficient)`` pairs;
coefficients are Fr ints. A constraint says ``<A,z> * <B,z> = <C,z>``.

Two storage layouts, switched by the seed's **A1** (LC storage layout):

* A1 off (``layout="dict"``): each LC is merged into its own ``dict`` {var: coeff} and every
  constraint is a tuple of three dicts — one heap object per LC, like ``Vec<(usize, Scalar)>``.
* A1 on (``layout="packed"``): all terms of a matrix go into flat growing arrays (``array('q')``
  of variable indices, a list of coefficients, row pointers) — no per-LC objects, like the
  SmallVec change. Evaluation is vectorised with numpy object arrays (gather, multiply, ``reduceat``).

And by **A2** (pre-sized assignment vectors): with ``capacity`` given, the witness vector is
allocated at full size once and filled by index (``ProvingAssignment::new_with_capacity``);
without it, it grows by ``append``.

Both layouts give identical ``a, b, c`` and the same ``fingerprint()``. Single-threaded: one
``ConstraintSystem`` per circuit, used by one thread.
"""

from __future__ import annotations

import hashlib
import random
from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from .field import R

Term = tuple[int, int]
LC = Sequence[Term]

ONE = 0


class UnsatisfiedConstraint(ValueError):
    """Raised by ``check`` / ``evaluate(check=True)``: names the first failing constraint."""

    def __init__(self, index: int, name: str, a: int, b: int, c: int) -> None:
        super().__init__(
            f"constraint {index} ({name!r}) is not satisfied: <A,z>*<B,z> = {a}*{b} mod r != <C,z> = {c}"
        )
        self.index = index
        self.name = name
        self._args = (index, name, a, b, c)

    def __reduce__(self):  # picklable, so it crosses from a synthesis process intact
        return (type(self), self._args)


class ConstraintSystem:
    """Builds an R1CS and its assignment together (synthesis computes values as it constrains).

    ``layout``: ``"dict"`` (A1 off) or ``"packed"`` (A1 on). ``capacity``: expected number of
    variables for A2 pre-sizing (None = grow). ``keep_names``: store a name per constraint for error
    messages (names are cheap strings; off only in benchmarks of the raw layout).
    """

    def __init__(self, layout: str = "dict", capacity: int | None = None, keep_names: bool = True) -> None:
        if layout not in ("dict", "packed"):
            raise ValueError(f"layout must be 'dict' or 'packed', got {layout!r}")
        self.layout = layout
        self.num_inputs = 1  # ONE counts as an input (bellman convention)
        self._num_vars = 1
        self._presized = capacity is not None
        if capacity is not None:
            self._values: list[int] = [0] * max(1, capacity)
            self._values[0] = 1
        else:
            self._values = [1]
        self.names: list[str] = []
        self._keep_names = keep_names
        self.num_constraints = 0
        if layout == "dict":
            self._rows: list[tuple[dict, dict, dict]] = []
        else:
            self._idx = [array("q"), array("q"), array("q")]
            self._coef: list[list[int]] = [[], [], []]
            self._ptr = [array("q", [0]), array("q", [0]), array("q", [0])]

    # -- variables -----------------------------------------------------------------------
    @property
    def num_vars(self) -> int:
        return self._num_vars

    def _push(self, value: int) -> int:
        i = self._num_vars
        if self._presized:
            if i < len(self._values):
                self._values[i] = value
            else:  # the shape hint was short: grow (and keep going)
                self._values.append(value)
        else:
            self._values.append(value)
        self._num_vars = i + 1
        return i

    def alloc_input(self, value: int) -> int:
        """Allocate a public input (must come before any private variable)."""
        if self._num_vars != self.num_inputs:
            raise ValueError("public inputs must be allocated before private variables")
        self.num_inputs += 1
        return self._push(value % R)

    def alloc(self, value: int) -> int:
        """Allocate a private witness variable with its value."""
        return self._push(value % R)

    def value(self, var: int) -> int:
        return self._values[var]

    def lc_value(self, lc: LC) -> int:
        v = self._values
        return sum(c * v[i] for i, c in lc) % R

    @property
    def assignment(self) -> list[int]:
        """The full assignment z (ONE, inputs, witnesses) as a list of ints (a copy when pre-sized)."""
        if self._presized and len(self._values) != self._num_vars:
            return self._values[: self._num_vars]
        return self._values

    # -- constraints ---------------------------------------------------------------------
    def enforce(self, a: LC, b: LC, c: LC, name: str = "") -> None:
        """Add ``<a,z> * <b,z> = <c,z>``. Terms may repeat a variable (they add up)."""
        if self.layout == "dict":
            rows = []
            for lc in (a, b, c):
                d: dict[int, int] = {}
                for i, k in lc:
                    d[i] = (d.get(i, 0) + k) % R
                rows.append(d)
            self._rows.append((rows[0], rows[1], rows[2]))
        else:
            for m, lc in enumerate((a, b, c)):
                idx, coef = self._idx[m], self._coef[m]
                for i, k in lc:
                    idx.append(i)
                    coef.append(k)
                self._ptr[m].append(len(idx))
        if self._keep_names:
            self.names.append(name)
        self.num_constraints += 1

    def constraint_name(self, j: int) -> str:
        return self.names[j] if j < len(self.names) else f"#{j}"

    # -- evaluation ----------------------------------------------------------------------
    def evaluate(self, z: Sequence[int] | None = None, *, check: bool = True) -> tuple[list[int], list[int], list[int]]:
        """a = A·z, b = B·z, c = C·z (one entry per constraint, ints mod r).

        With ``check``: raises ``UnsatisfiedConstraint`` naming the first j with a_j·b_j != c_j.
        """
        zz = self.assignment if z is None else z
        if self.layout == "dict":
            out: tuple[list[int], list[int], list[int]] = ([], [], [])
            for rowset in self._rows:
                for m in range(3):
                    out[m].append(sum(k * zz[i] for i, k in rowset[m].items()) % R)
            a, b, c = out
        else:
            zo = np.empty(len(zz), dtype=object)
            zo[:] = zz
            a, b, c = (self._eval_packed(m, zo) for m in range(3))
        if check:
            self._check(a, b, c)
        return a, b, c

    def _eval_packed(self, m: int, zo: np.ndarray) -> list[int]:
        n = self.num_constraints
        idx = np.frombuffer(self._idx[m], dtype=np.int64)
        ptr = np.frombuffer(self._ptr[m], dtype=np.int64)
        out = np.zeros(n, dtype=object)
        if idx.size == 0:
            return [0] * n
        coef = np.empty(idx.size, dtype=object)
        coef[:] = self._coef[m]
        prod = coef * zo[idx]
        starts = ptr[:-1]
        nonempty = ptr[1:] > starts
        # reduceat misbehaves on empty segments: reduce only the non-empty ones.
        sums = np.add.reduceat(prod, starts[nonempty])
        out[nonempty] = sums % R
        return out.tolist()

    def _check(self, a: Sequence[int], b: Sequence[int], c: Sequence[int]) -> None:
        for j in range(len(a)):
            if a[j] * b[j] % R != c[j]:
                raise UnsatisfiedConstraint(j, self.constraint_name(j), a[j], b[j], c[j])

    def check(self) -> None:
        """Raise ``UnsatisfiedConstraint`` for the first unsatisfied constraint."""
        self.evaluate(check=True)

    # -- structure -----------------------------------------------------------------------
    def iter_terms(self, m: int) -> Iterable[tuple[int, int, int]]:
        """Yield (row, var, coeff) of matrix m (0=A, 1=B, 2=C) — duplicates possible in packed."""
        if self.layout == "dict":
            for j, rowset in enumerate(self._rows):
                for i, k in rowset[m].items():
                    yield j, i, k
        else:
            idx, coef, ptr = self._idx[m], self._coef[m], self._ptr[m]
            for j in range(self.num_constraints):
                for t in range(ptr[j], ptr[j + 1]):
                    yield j, idx[t], coef[t]

    def column_sums(self, m: int, row_weights: Sequence[int]) -> list[int]:
        """For each variable i: Σ_j M[j][i]·row_weights[j] mod r (used by setup: u_i(τ) etc.)."""
        acc = [0] * self._num_vars
        if self.layout == "dict":
            for j, rowset in enumerate(self._rows):
                w = row_weights[j]
                for i, k in rowset[m].items():
                    acc[i] += k * w
        else:
            idx, coef, ptr = self._idx[m], self._coef[m], self._ptr[m]
            for j in range(self.num_constraints):
                w = row_weights[j]
                for t in range(ptr[j], ptr[j + 1]):
                    acc[idx[t]] += coef[t] * w
        return [x % R for x in acc]

    def nnz(self) -> int:
        if self.layout == "dict":
            return sum(len(d) for row in self._rows for d in row)
        return sum(len(i) for i in self._idx)

    def fingerprint(self) -> str:
        """Layout-independent digest of the constraint structure (not the witness).

        Schwartz–Zippel style: evaluates A, B, C at a fixed pseudo-random vector u and hashes the
        results with the sizes, so any change to any coefficient changes the digest with
        overwhelming probability, at the cost of one matrix-vector product.
        """
        rng = random.Random(0x67707472)  # fixed: the digest must be stable across runs
        u = [rng.randrange(R) for _ in range(self._num_vars)]
        a, b, c = self.evaluate(u, check=False)
        h = hashlib.blake2b(digest_size=20)
        h.update(f"r1cs:{self.num_inputs}:{self._num_vars}:{self.num_constraints}".encode())
        for vec in (a, b, c):
            h.update(b"".join(x.to_bytes(32, "little") for x in vec))
        return h.hexdigest()
