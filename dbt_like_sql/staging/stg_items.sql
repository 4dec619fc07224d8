-- config: materialized=view
-- Item catalogues (every delivery, with the days it holds on) with a normalized group label ('<unknown>' where the protected characteristic is missing).
SELECT *, coalesce(group_id, '<unknown>') AS group_label
FROM {{ source('raw', 'items') }}
