-- config: partitioned=daily
-- Sufficient statistics of the weighted-CDF EO transform (fair_pipeline.core.eo_aggregate): impressions and
-- clicks per group x position x score bin for one day of observational logs. A score is counted at the centre
-- of its bin [k w, (k + 1) w), w = $eo_score_bin_width; the weights 1 / w_position are applied when a training
-- window is read (fair_pipeline/eo/sql.py), so any position-bias estimate can be used without re-running this
-- pass. NULL groups are kept (the fit decides).
SELECT
    partition_date,
    group_id,
    position,
    (FLOOR(score / $eo_score_bin_width) + 0.5) * $eo_score_bin_width AS score_value,
    CAST(COUNT(*) AS BIGINT) AS impressions,
    CAST(SUM(click) AS BIGINT) AS clicks
FROM {{ ref('stg_observational_impressions') }}
WHERE partition_date = $partition_date
GROUP BY partition_date, group_id, position, (FLOOR(score / $eo_score_bin_width) + 0.5) * $eo_score_bin_width
