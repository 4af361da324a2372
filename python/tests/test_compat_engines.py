"""cudnn.engines.manifest: frontend-written code asks whether one of the frontend's Python
engine families offers an engine (e.g. to decide what to test); dnngraph offers none."""

import subprocess
import sys

from dnngraph.engines.manifest import MANIFEST, opt_in_engines_enabled


def test_every_frontend_family_is_listed_and_offers_nothing():
    names = [f.name for f in MANIFEST]
    assert "frost_sdpa_fwd" in names and "frost_sdpa_bwd" in names and len(set(names)) == 11
    fam = next(f for f in MANIFEST if f.name == "frost_sdpa_fwd")
    assert "sdpa_fwd_prefill_sm100" not in fam.offered_ids()
    assert all(f.offered_ids() == {} and not f.owns(0) for f in MANIFEST)
    assert opt_in_engines_enabled() is False


def test_reachable_under_the_frontend_module_name():
    # A program importing dnngraph under the frontend's name reaches the submodule by that name.
    code = ("import sys, dnngraph; sys.modules['cudnn'] = dnngraph\n"
            "from cudnn.engines.manifest import MANIFEST\n"
            "print(sorted(f.name for f in MANIFEST)[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "frost_conv"
