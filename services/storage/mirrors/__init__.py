"""In-memory mirrors of SQLite tables: derived copies that answer hot reads without SQL, never a source of truth.

* ``bm25_postings.KeywordIndex`` mirrors ``booku_memory_fts`` (the keyword rows) as numpy postings and ranks them
  with FTS5's own bm25;
* ``record_states.RecordStates`` mirrors each keyword row's record id, bucket, status and deletion flag from
  ``booku_memory_records``, so a retrieval's usual filter needs no SQL;
* ``candidate_rows.CandidateRows`` mirrors the ranking columns and tags of every live record;
* ``stored_vectors.StoredVectors`` mirrors the vector the vector index holds for every live record (the cached
  passage vector of its ``embedded_text_hash``).

``keyword_mirror.MemoryKeywordIndex`` owns all four: it loads them from one read snapshot and, before every read,
follows ``booku_keyword_journal``, which every keyword-row write and the triggers of migrations 0011–0013 and 0018
append to in the writing transaction. So a mirror holds what the committed tables hold whichever connection or
process wrote them; a gap or a whole-table rebuild drops the mirrors and reads fall back to SQL until a reload is
done. One runtime owns a data dir at a time (``services.ownership``), so only that process keeps mirrors; clients ask
it.
"""
