"""The sadl plugin module of sadl_optim (entry point in the group ``sadl.plugins``)."""

from __future__ import annotations

from sadl.plugins import require_api

require_api("1.0")
