"""Commands that make data: specs, generate, judge, validate, merge, SLURM, the quick start.

- ``generate``: `mashbill generate SPEC`: run a spec's pending inputs through its teacher into the store.
- ``judge``: `mashbill judge SPEC`: the spec's judge (a second teacher) scores accepted records or ranks ...
- ``merge``: `mashbill merge OUT_STORE SHARD_STORE...`: combine shard stores into one, verifying there is no ...
- ``quickstart``: `mashbill quickstart`: the README's first command; a small mixed dataset from the embedded
  teacher.
- ``slurm``: `mashbill slurm generate SPEC --nodes N`: render the SLURM scripts for a sharded multi-node run.
- ``spec``: `mashbill spec ls | show | check | lock`: inspect and guard versioned specs.
- ``validate``: `mashbill validate`: every check on a spec's stored records, or on a dataset file Mashbill did ...
"""
