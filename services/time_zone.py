"""The deployment's time zone: which zone a query's dates are read in, which zone a new memory's times are kept in,
and where that zone came from.

Why one place: "5月2日" and "昨天" name local calendar days, and a memory's event time is an instant whose day
depends on the zone it is read in. A store written in Shanghai and queried from a server left at UTC would read
every memory's day in UTC, so a memory of 07:00 on May 2nd (Shanghai) became May 1st and the question about May 2nd
missed it. So each memory keeps the zone its times were written in (``booku_memory_records.time_zone``, migration
0015) and its days are read in that zone, while the query's words are read in the deployment's zone.

Sources, first found wins: the configuration (``retrieval.timezone``), the ``TZ`` environment variable, the
system's zone (``/etc/localtime``, as the host process sees it: the plugin runs inside the host, so the host's zone
is this process's). The name is an IANA name where one is known, else a fixed offset such as ``UTC+08:00``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

from .logic.time_anchor import offset_name, zone_named

SOURCE_LABELS = {"config": "配置 retrieval.timezone", "TZ": "环境变量 TZ", "system": "系统时区"}


@dataclass(frozen=True)
class DeploymentZone:
    """A zone with its name (IANA or ``UTC±HH:MM``) and source (``config`` | ``TZ`` | ``system``)."""

    zone: tzinfo
    name: str
    source: str

    def describe(self) -> dict[str, str]:
        """``{"name", "source", "label"}`` for status pages (``label`` says the source in Chinese)."""
        return {"name": self.name, "source": self.source, "label": SOURCE_LABELS.get(self.source, self.source)}


def deployment_zone(configured: str = "", environ: dict[str, str] | None = None) -> DeploymentZone:
    """The zone of this deployment: ``configured`` (already validated at config load), else ``TZ``, else the
    system's. A ``TZ`` that names no zone is skipped (the C library ignores it too)."""
    if configured.strip():
        return DeploymentZone(ZoneInfo(configured.strip()), configured.strip(), "config")
    tz_variable = (os.environ if environ is None else environ).get("TZ", "").strip().lstrip(":")
    if tz_variable:
        found = zone_named(tz_variable)
        if found is not None:
            return DeploymentZone(found, tz_variable, "TZ")
    return _system_zone()


def _system_zone() -> DeploymentZone:
    """The system's zone: its IANA name from the ``/etc/localtime`` link where there is one, else the offset the
    C library applies now."""
    try:
        target = str(Path("/etc/localtime").resolve())
        marker = "/zoneinfo/"
        if marker in target:
            name = target.split(marker, 1)[1]
            found = zone_named(name)
            if found is not None:
                return DeploymentZone(found, name, "system")
    except OSError:
        pass
    offset = datetime.now().astimezone().utcoffset() or timedelta(0)
    return DeploymentZone(timezone(offset), offset_name(offset), "system")
