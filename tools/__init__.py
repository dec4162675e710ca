"""LLM-facing tools of Booku Memory, independent of any host framework.

The host adapter and the standalone CLI call only what is re-exported here:

* ``run_memory_command(service, command, *, stream_id=None, config=None)`` and ``memory_command_tool_schema()``
* ``run_temporary_memo(service, *, content, expire_hours, action, memo_id, allow_shorten, stream_id, config)``
  and ``temporary_memo_tool_schema()``
* ``render_for_llm(result)``: the exact text a result takes in the prompt (what the output budget measures)
* ``llm_tool_specs()``, ``host_parameters(spec)`` and ``run_host_tool(service, name, arguments)``: the companion
  tools and ``recall`` as host tools (the same table the ``memory_command`` sub-commands come from), and
  ``session_self_entries(service)`` for the start of a session
* ``build_manual(config)`` and the reminder/flashback builders in ``reminders`` and ``flashback``.
"""

from .companion_commands import run_host_tool, session_self_entries
from .flashback import FlashbackPicker, candidate_filter
from .formatting import render_for_llm
from .llm_tool_specs import HostParameter, host_parameters, llm_tool_specs
from .manual import build_command_help, build_manual
from .memory_command import parameter_descriptions as memory_command_parameter_descriptions
from .memory_command import run_memory_command
from .memory_command import tool_schema as memory_command_tool_schema
from .reminders import (
    ACTIVE_DIGEST_REMINDER_NAME,
    KNOWLEDGE_GUIDE_REMINDER_NAME,
    MANUAL_REMINDER_NAME,
    MEMO_REMINDER_NAME,
    REMINDER_NAMES,
    ToolUsageTracker,
    active_memory_digest,
    append_extra,
    flashback_block,
    knowledge_guide,
    manual_reminder,
    normalise_tool_name,
    temporary_memo_block,
)
from .temporary_memo import parameter_descriptions as temporary_memo_parameter_descriptions
from .temporary_memo import run_temporary_memo
from .temporary_memo import tool_schema as temporary_memo_tool_schema

__all__ = [
    "ACTIVE_DIGEST_REMINDER_NAME",
    "FlashbackPicker",
    "HostParameter",
    "KNOWLEDGE_GUIDE_REMINDER_NAME",
    "MANUAL_REMINDER_NAME",
    "MEMO_REMINDER_NAME",
    "REMINDER_NAMES",
    "ToolUsageTracker",
    "active_memory_digest",
    "append_extra",
    "build_command_help",
    "build_manual",
    "candidate_filter",
    "flashback_block",
    "host_parameters",
    "knowledge_guide",
    "llm_tool_specs",
    "manual_reminder",
    "memory_command_parameter_descriptions",
    "memory_command_tool_schema",
    "normalise_tool_name",
    "render_for_llm",
    "run_host_tool",
    "run_memory_command",
    "run_temporary_memo",
    "session_self_entries",
    "temporary_memo_block",
    "temporary_memo_parameter_descriptions",
    "temporary_memo_tool_schema",
]
