-- 0037: placeholder on branch w-flow only (the numbers of other helpers' migrations, so 0039 loads); delete at merge
select 1;
