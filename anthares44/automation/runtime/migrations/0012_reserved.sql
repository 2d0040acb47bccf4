-- 0012_reserved: the number the alerts branch's migration takes; this file stands in for it on the logs branch
-- only and is deleted when the two merge (0013 follows 0012 without a gap).
select 1;
