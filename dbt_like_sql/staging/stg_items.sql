-- config: materialized=view
-- Item catalogue with a normalized group label ('<unknown>' where the protected characteristic is missing).
SELECT *, coalesce(group_id, '<unknown>') AS group_label
FROM {{ source('raw', 'items') }}
