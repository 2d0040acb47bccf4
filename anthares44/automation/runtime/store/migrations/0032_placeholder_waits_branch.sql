-- 0032: a placeholder on branch w-waits only, so that 0033 follows an unbroken chain; main has tengine's 0032
-- (durable timers) instead. Delete this file when merging w-waits.
select 1;
