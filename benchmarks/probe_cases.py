"""Every case of ``probe_bad_inputs.py`` (what each is: ``probe_case.py``), in family order."""

from __future__ import annotations

import probe_cases_data
import probe_cases_inputs
import probe_cases_state
from probe_case import Case

CASES: list[Case] = [*probe_cases_data.CASES, *probe_cases_inputs.CASES, *probe_cases_state.CASES]
FAMILIES = ("dataset", "rundir", "images", "text", "chat", "indices", "gallery", "threads", "build")
