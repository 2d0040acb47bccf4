-- 0035: placeholder for another helper's migration number (w-children needs no gap before 0037); drop at merge.
select 1;
