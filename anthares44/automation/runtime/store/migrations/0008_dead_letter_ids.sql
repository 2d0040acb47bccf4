-- 0008_dead_letter_ids: one id prefix for dead letters (docs/queues.md). The bus wrote `dl_<ULID>`, every other
-- path `dlq_…`; the `dl_` ids, and the columns that point at them, become `dlq_<ULID>`, and a check keeps it so.
update automation.runs set dead_letter_id = 'dlq_' || substr(dead_letter_id, 4)
where dead_letter_id like 'dl\_%';
update automation.dead_letters set redrive_of = 'dlq_' || substr(redrive_of, 4)
where redrive_of like 'dl\_%';
update automation.dead_letters set dead_letter_id = 'dlq_' || substr(dead_letter_id, 4)
where dead_letter_id like 'dl\_%';
alter table automation.dead_letters add constraint dead_letters_id_prefix check (dead_letter_id like 'dlq\_%');
