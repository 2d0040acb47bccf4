-- 0035 belongs to the event waits branch (w-events); this placeholder keeps the numbering without gaps on the
-- approvals branch only. Drop it when merging: 0036_approvals.sql does not depend on 0035's content.
select 1;
