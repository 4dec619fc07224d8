-- Observational (production-ranked) impressions of one day, validated rows only, with the serve hour.
SELECT
    partition_date, ts, request_id, query_id, policy, position, original_position,
    item_id, group_id, score, click, hour(ts) AS serve_hour
FROM {{ source('raw', 'observational_impressions') }}
WHERE partition_date = $partition_date
