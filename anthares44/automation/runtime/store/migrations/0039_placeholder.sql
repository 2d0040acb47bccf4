-- 0039: placeholder for another helper's migration number (w-debounce needs no gap before 0040); drop at merge.
select 1;
