"""``cudnn.engines.manifest``: the frontend's engine families, none of which dnngraph offers."""

from __future__ import annotations

from typing import Dict, Tuple


class EngineFamily:
    """One family of the frontend's Python engines (a kind of graph they serve), by name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def offered_ids(self) -> Dict[str, int]:
        """{engine name: engine id} of the engines on offer: always empty in dnngraph."""
        return {}

    def owns(self, engine_id: int) -> bool:
        return False

    def __repr__(self) -> str:
        return f"EngineFamily({self.name!r}, offered=0)"


def opt_in_engines_enabled() -> bool:
    """The frontend's opt-in switch for its experimental engines; dnngraph has none."""
    return False


# The family names of the cuDNN frontend 1.32.
MANIFEST: Tuple[EngineFamily, ...] = tuple(EngineFamily(n) for n in (
    "gdn", "kda", "gdn2", "gdp", "mamba2", "frost_gemm", "frost_sdpa_fwd", "frost_sdpa_bwd",
    "frost_conv", "frost_norm_fwd", "frost_norm_bwd"))
