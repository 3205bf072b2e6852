"""Bundled training backends (``prove train``), registered lazily so that listing plugins never
imports torch, TRL or OpenRLHF:

- ``trl``: multi-turn GRPO with TRL's GRPOTrainer on one node (CPU or GPU);
- ``openrlhf``: a run directory for OpenRLHF on a Ray cluster (prompt data, an agent that plays
  episodes on live sessions and returns the PROVE reward, the launch script);
- ``verl``: a run directory for verl's ``main_ppo`` (parquet data, an agent loop that plays every
  rollout on its own live session and returns the PROVE reward, the launch script).
"""

from __future__ import annotations

from prove_core import hookimpl


@hookimpl
def prove_register_trainers(register):
    register("prove_plugins.train.trl_backend:TRLTrainer", name="trl",
             summary="Multi-turn GRPO with TRL's GRPOTrainer over live sessions (single node, CPU or GPU)")
    register("prove_plugins.train.openrlhf_backend:OpenRLHFTrainer", name="openrlhf",
             summary="OpenRLHF on Ray + vLLM + DeepSpeed: prompt data, live-session agent, launch script")
    register("prove_plugins.train.verl_backend:VerlTrainer", name="verl",
             summary="verl on Ray + vLLM/SGLang + FSDP: parquet data, live-session agent loop, launch script")
