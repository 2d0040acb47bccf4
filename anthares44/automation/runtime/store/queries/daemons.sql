-- Daemon heartbeats (migration 0013): which daemons serve this database, and when each was last seen.

-- name: daemon_heartbeat
-- purpose: record that daemon :worker_id (on :host, pid :pid, package :version, running :in_flight runs) is alive at :now; its first beat sets started_at
insert into automation.daemons as d (worker_id, host, pid, version, started_at, last_seen_at, in_flight)
values (:worker_id, :host, :pid, :version, :now, :now, :in_flight)
on conflict (worker_id) do update
    set last_seen_at = excluded.last_seen_at, in_flight = excluded.in_flight, stopped_at = null;

-- name: daemon_stopped
-- purpose: daemon :worker_id shut down cleanly at :now
update automation.daemons set stopped_at = :now, last_seen_at = :now, in_flight = 0 where worker_id = :worker_id;

-- name: daemons_list
-- purpose: every daemon ever seen on this database, the most recently seen first (at most :limit)
select worker_id, host, pid, version, started_at, last_seen_at, stopped_at, in_flight
from automation.daemons
order by last_seen_at desc, worker_id
limit :limit;

-- name: control_identity
-- purpose: the role and database the daemon's control store connections use (the workflow SQL wall refuses both)
select current_user as role, current_database() as database;
