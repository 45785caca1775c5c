"""Groth16 key generation and the key cache (a single-party setup, not a ceremony).

Modules, each importing only those listed before it (plus the circuit modules below the package):

* ``template``: the template instance whose R1CS names a key (``TEMPLATE_SEED``, ``TEMPLATE_OPTS``,
  ``template_cs``);
* ``block``: the template R1CS as K copies of one challenge's block, for key generation without the whole
  R1CS (Python-int references of what the GPU computes);
* ``setup``: the key types (``ProvingKey``, ``VerifyingKey``) and the two generators, ``generate`` (host) and
  ``generate_device`` (CUDA, through ``gputrace.prover.backends.cuda_fixed_base``: CuPy stays in
  ``backends/cuda*``, imported only when the device path runs);
* ``npz_read``: ``read_npz``, ``np.load`` of an ``.npz`` without zipfile's copies for stored members, CRC-checked;
* ``keys``: the key files (``pk.npz``, ``vk.json``), their checks and errors;
* ``fingerprint_record``: recorded R1CS fingerprints, so a cache hit skips the template synthesis;
* ``cache``: ``get_keys``, which finds a shape's keys or generates and saves them.

Nothing here imports the proving pipeline (an import-linter contract in pyproject.toml); ``import
gputrace.prover.keygen`` imports none of the modules above.
"""
