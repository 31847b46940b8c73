"""Trainers: preflight, validation ladder and thin TRL/PEFT trainers over frozen snapshots.

- ``base_model``: Base models as local Hugging Face folders; nothing is downloaded.
- ``config``: Training configs: one small YAML per run, loaded into a strict model (unknown keys are refused).
- ``deepspeed``: DeepSpeed JSON checks: deepspeed's own config model, and no silent override of the training ...
- ``ladder``: The validation ladder: config -> forward -> batch -> steps:N -> [epoch] -> full.
- ``launcher``: Device placement: the device comes from LOCAL_RANK before anything allocates on it.
- ``methods/``: The training methods: SFT, DPO, classify (with distillation, narrowing, reward pairs).
- ``narrow_preflight``: The preflight's checks of a narrow or distilled classify student (no model load, one line
  per ...
- ``preflight``: The preflight: seconds, no model load, and the first step of every train command.
- ``run``: One training command: preflight, device, ladder stages, run folder, run records.
- ``runfolder``: The run folder the exporters read, and its lineage (spec hashes -> snapshot id -> run id).
- ``slurm``: The cluster hand-off: a SLURM job chain that trains one config on LUMI-G's MI250X nodes.
"""
