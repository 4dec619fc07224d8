-- config: materialized=view
-- Observational (production-ranked) impressions, validated rows only, with the serve hour.
SELECT
    partition_date, ts, request_id, query_id, policy, position, original_position,
    item_id, group_id, score, click, hour(ts) AS serve_hour
FROM {{ source('raw', 'observational_impressions') }}
