-- config: materialized=view
-- Randomized impressions (shuffle and adjacent_swap), validated rows only; `displaced` marks items not
-- shown at their production slot (NULL where the log has no production ranking).
SELECT
    partition_date, ts, request_id, query_id, policy, position, original_position,
    item_id, group_id, score, click, hour(ts) AS serve_hour, position <> original_position AS displaced
FROM {{ source('raw', 'randomized_impressions') }}
