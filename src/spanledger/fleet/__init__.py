"""Reading a fleet's event logs: many files, rotated, scanned by DuckDB with bounded memory.

``spanledger report`` and ``spanledger export`` go through here; ``import spanledger`` never
does, so DuckDB is imported only when a report is asked for.
"""

from __future__ import annotations

from spanledger.fleet.sources import log_files

__all__ = ["log_files"]
