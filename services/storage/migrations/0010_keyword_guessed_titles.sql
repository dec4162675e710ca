-- 0010: the keyword index no longer weighs a title that is only guessed from the content's first line
-- (``logic.text.keyword_title``): such a row's title column is empty, the words stay in the content column. FTS
-- rows are derived data, so nothing changes here but the flag: the runtime refills the index at the next start
-- (as after 0007) and then clears it.
INSERT INTO booku_meta (key, value) VALUES ('keyword_index_rebuild', '1')
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
