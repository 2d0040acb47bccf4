-- 0012_reserved: number 0012 belongs to the alerts branch's migration; this empty stand-in only keeps the numbering
-- without gaps on the partitions branch. Whoever merges both keeps the alerts 0012 file and deletes this one.
select 1;
