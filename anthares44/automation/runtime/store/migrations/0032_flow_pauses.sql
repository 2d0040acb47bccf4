-- 0032_flow_pauses (0034 once merged: the lead renumbers): paused flow keys shared by every daemon (§22,
-- docs/flow.md "The upstream 429 pause").
-- One row per (project, flow key) that was ever paused; paused at an instant t when paused_until > t (a pause
-- that ended, by itself or by `flow resume`, stays as the key's last pause).
--   key           the key a call counts against: `http:<project>:<host>` by default, or a step's `rateKey`
--   paused_until  when calls on the key may go again; an upstream 429 only ever moves it later, an operator's
--                 `flow pause --until` sets it, `flow resume` sets it to the instant of the resume
--   source        upstream (a 429, or a 503 with Retry-After) | operator
--   reason        the far side's answer, or the operator's --reason; paused_by: who (null for upstream)
--   resumed_by    who resumed it by hand, when it was
--   paused_count  how many pauses the key had (the metric of upstream slow-downs)
create table automation.flow_pauses (
    project_id   text        not null,
    key          text        not null,
    paused_until timestamptz not null,
    source       text        not null check (source in ('upstream', 'operator')),
    reason       text,
    paused_by    text,
    resumed_by   text,
    paused_at    timestamptz not null,
    paused_count integer     not null default 1,
    updated_at   timestamptz not null,
    primary key (project_id, key)
);
