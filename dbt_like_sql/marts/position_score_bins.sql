-- config: partitioned=daily, group=position_bias
-- Impressions and clicks per policy x position x fixed-width score bin, one partition per day.
-- Fixed-width bins, floor(score / $position_bias_bin_width), keep days additive: a training window is a SUM
-- over partitions. Estimators merge these fine bins by an integer factor (core.position_bias_aggregates).
-- Rows without a score keep a NULL bin: CTR-ratio estimators still count them, binned ones leave them out.
SELECT
    partition_date,
    policy,
    position,
    CAST(floor(score / $position_bias_bin_width) AS BIGINT) AS score_bin,
    CAST(count(*) AS BIGINT) AS impressions,
    CAST(sum(click) AS BIGINT) AS clicks
FROM (
    SELECT partition_date, policy, position, score, click
    FROM {{ ref('stg_observational_impressions') }}
    WHERE partition_date = $partition_date
    UNION ALL
    SELECT partition_date, policy, position, score, click
    FROM {{ ref('stg_randomized_impressions') }}
    WHERE partition_date = $partition_date
) AS impressions
GROUP BY partition_date, policy, position, CAST(floor(score / $position_bias_bin_width) AS BIGINT)
