"""Mashbill: a dataset factory for distilling an LLM orchestrator's routing and planning decisions.

- ``cli/``: The `mashbill` command line: one entry point, one module per subcommand, loaded lazily.
- ``cpus``: The CPUs this process may use (its affinity, as SLURM and taskset set it), and a job's worker count.
- ``errors``: One base error for user-facing problems; the CLI prints these as one line, without a traceback.
- ``files``: Publish a file or a folder whole: write under a temporary name beside it, fsync, rename into place.
- ``hashing``: sha256 the one way: of bytes, text, a file (read in chunks) or a JSON value in canonical form ...
- ``jsontext``: JSON that a model or a person wrote, read with a nesting limit and without NaN: never a crash.
- ``memory``: Give freed memory back to the system (glibc only): the freeze and the trainers ask alike.
- ``paths``: Where Mashbill keeps what it builds once and reuses: one variable, MASHBILL_CACHE (default ...
"""

__version__ = "0.1.0"
