"""Reading a fleet's event logs: many files, rotated, each line judged by the library's own
decoder, then grouped by DuckDB with bounded memory.

``spanledger report`` and ``spanledger export`` go through here; ``import spanledger`` never
does, so DuckDB is imported only when a report is asked for.
"""

from __future__ import annotations

from spanledger.fleet.sources import LogFiles, log_files

__all__ = ["LogFiles", "log_files"]
