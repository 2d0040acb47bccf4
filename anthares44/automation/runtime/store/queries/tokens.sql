-- API tokens (§17): stored as sha256, scoped, expiring, CIDR-limited.

-- name: token_insert
-- purpose: store a new API token (its sha256 only)
insert into automation.api_tokens (token_id, project_id, name, token_sha256, scopes, allow_cidrs, created_at,
                                   expires_at)
values (:token_id, :project, :name, :sha256, :scopes::text[], :cidrs::cidr[], :now, :expires_at);

-- name: token_by_hash
-- purpose: the token whose sha256 this is, with whether the client address is inside one of its CIDRs
select token_id, project_id, name, scopes, allow_cidrs::text[] as allow_cidrs, created_at, expires_at, revoked_at,
       (cardinality(allow_cidrs) = 0 or exists (select 1 from unnest(allow_cidrs) c where :address::inet <<= c))
           as address_allowed
from automation.api_tokens where token_sha256 = :sha256;

-- name: tokens_list
-- purpose: the tokens of a project (never the token itself)
select token_id, project_id, name, scopes, allow_cidrs::text[] as allow_cidrs, created_at, expires_at, revoked_at,
       last_used_at
from automation.api_tokens where project_id = :project order by created_at desc, token_id;

-- name: token_revoke
-- purpose: revoke a token of a project; returns its id when it existed
update automation.api_tokens set revoked_at = :now
where token_id = :token_id and project_id = :project and revoked_at is null
returning token_id;
