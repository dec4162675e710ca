-- 0015: the zone each memory's times were written in ("Asia/Shanghai", "UTC+08:00"; '' = unknown).
--
-- A memory's day ("5月2日") is its event time (else its creation time) read as a calendar day, and that day depends
-- on the zone. Reading every memory in the querying process's zone shifted the days of a store written elsewhere.
-- Rows written before this migration keep '' and are read in the deployment's zone, as they always were.

ALTER TABLE booku_memory_records ADD COLUMN time_zone TEXT NOT NULL DEFAULT '';
