"""Reading a submitted HTML form with the dashboard's own size limit.

Starlette caps each form field at 1 MB by default and answers a bigger one with an English 400, losing what was
typed. The dashboard instead lets a field hold as much text as an upload may (``settings.max_upload_bytes``), so
an oversized text reaches the form checks, which answer in Chinese next to the field and show the text again.
Starlette measures a field of an urlencoded form before decoding it, and percent-encoding makes three bytes of each
byte of non-ASCII text, hence the factor. Starlette keeps the parsed form on the request: whichever reads it first
(the CSRF check) must use this function.
"""

from __future__ import annotations

from fastapi import Request
from starlette.datastructures import FormData

PERCENT_ENCODING_FACTOR = 3


async def read_form(request: Request) -> FormData:
    """The request's form, each field holding up to ``settings.max_upload_bytes`` of UTF-8 text."""
    limit = int(request.app.state.settings.max_upload_bytes) * PERCENT_ENCODING_FACTOR
    return await request.form(max_part_size=limit)
