from sadl.plugins import require_api

require_api("2.0")
