"""``tests/older_sdks`` needs the SDK versions some frameworks pin (cohere 5.x, voyageai 0.3.x),
which cannot share a venv with the dev extra's: it runs in ``.venv-older``, started by
``tests/frameworks/test_older_sdks.py``, and is left out of every other run."""

from __future__ import annotations

import os

OLDER_SDKS_SUITE = "SPANLEDGER_OLDER_SDKS_SUITE"

collect_ignore = [] if os.environ.get(OLDER_SDKS_SUITE) == "1" else ["older_sdks"]
