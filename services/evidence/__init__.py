"""Chat evidence, recall over evidence and memory, dreaming (episodes and proposals), human review, retraction.

Public surface (see docs in each module):

* ``record_host_message(runtime, ...)``: the host adapter records ``on_message_received`` / ``on_message_sent``;
* ``EvidenceService(runtime, scope)``: ``search`` (chat recall beside memory/knowledge recall), listings,
  ``retract_message``, ``status``, manual stage runs;
* ``ReviewService(runtime, scope)``: the review queue (approve, edit-then-approve, reject, flags) — human only;
* ``DreamingScheduler(runtime, host_chat_fn=...)``: the background loop (``start()`` / ``await stop()``);
* ``ChatModel`` with ``OpenAICompatibleChatModel`` and ``HostChatModel``; ``attach_evidence`` for explicit settings;
* ``CONFIG_KEYS``: the ``[evidence]`` and ``[dreaming]`` keys for the config schema.
"""

from .audit_events import EVENT_ACTIONS, REVISION_ACTIONS
from .capture import record_host_message
from .chat_model import (
    ChatModel,
    ChatModelUnavailableError,
    HostChatModel,
    OpenAICompatibleChatModel,
    build_chat_model,
)
from .hub import EvidenceHub, attach_evidence, evidence_hub
from .review import ReviewService, review_batch
from .scheduler import DreamingScheduler
from .search import CHAT_HISTORY_NOTICE, EPISODE_NOTICE, render_results
from .service import EvidenceService
from .settings import (
    CONFIG_KEYS,
    DreamingSettings,
    EvidenceSettings,
    dreaming_settings,
    evidence_settings,
)

__all__ = [
    "CHAT_HISTORY_NOTICE",
    "CONFIG_KEYS",
    "EPISODE_NOTICE",
    "EVENT_ACTIONS",
    "REVISION_ACTIONS",
    "ChatModel",
    "ChatModelUnavailableError",
    "DreamingScheduler",
    "DreamingSettings",
    "EvidenceHub",
    "EvidenceService",
    "EvidenceSettings",
    "HostChatModel",
    "OpenAICompatibleChatModel",
    "ReviewService",
    "attach_evidence",
    "build_chat_model",
    "dreaming_settings",
    "evidence_hub",
    "evidence_settings",
    "record_host_message",
    "render_results",
    "review_batch",
]
