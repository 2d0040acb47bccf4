-- 0044_reserved: the number another branch's migration takes (issue 31 is split between helpers); this file stands
-- in for it on the rolling-upgrades branch only and is deleted when they merge (0045 follows without a gap).
select 1;
