"""Settings in the Django style: module-level constants, read once, from the environment
where a deployment sets them (docs/testing.md, "Recipes").

In a Django project these lines go in the project's ``settings.py``, and ``jobs.py`` reads
them through ``django.conf.settings`` instead of importing this module.
"""

from __future__ import annotations

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent

# The ledger's database: postgresql://… in production (the application's own database, so
# that an enqueue can join the application's transaction), a SQLite file in development.
JOBLEDGER_DB = os.environ.get("JOBLEDGER_DB", f"sqlite:///{BASE_DIR / 'jobledger.db'}")
