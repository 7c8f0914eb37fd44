{{- /*
reconsume's Prometheus alerts as rule groups (`groups:`), thresholds from .Values.alerts. Used
by the PrometheusRule and by the rule-file ConfigMap. `promtool check rules` and `promtool
test rules tests/chart/alerts_test.yaml` run against the rules rendered with the default
values (tests/chart/test_alerts.py); each alert's runbook is the section of docs/runbooks.md
whose heading is its name.

The annotations are Prometheus templates, kept out of Helm's way in raw strings ({{` ... `}}).

Scrape conventions the expressions rely on (the chart's ServiceMonitor/PodMonitor set them; a
hand-written scrape config must too):
  job=<alerts.brokerJob>      the brokers' /metrics (container port "http", 8080)
  job=<alerts.operatorJob>    the operator's /metrics (port 9090)
  reconsume_cluster           the BrokerCluster a broker belongs to: its pods' label
                              app.kubernetes.io/instance, relabelled. Per-group alerts add a
                              group's series up over its brokers by
                              (namespace, reconsume_cluster, group).
The label `group` of the broker metrics is the RocketMQ group name (a ConsumerGroup's
status.groupName), not the ConsumerGroup resource's name.
*/ -}}

{{- define "reconsume.runbook" -}}
{{- printf "%s#%s" (index . 0).Values.alerts.runbookUrl (lower (index . 1)) -}}
{{- end -}}

{{- define "reconsume.alert.deadLettersGrowing" -}}
{{- $a := .Values.alerts.deadLettersGrowing -}}
# Messages keep becoming dead letters (consumers give them up after their last retry).
- alert: ReconsumeDeadLettersGrowing
  expr: |
    sum by (namespace, reconsume_cluster, group) (
      increase(reconsume_dead_letters_total[{{ $a.window }}])
    ) > {{ $a.minIncrease }}
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`Messages of consumer group {{ $labels.group }} keep becoming dead letters`}}
    description: >-
      {{`Consumer group {{ $labels.group }} (BrokerCluster {{ $labels.reconsume_cluster }},
      namespace {{ $labels.namespace }}) has had messages become dead letters for`}} {{ $a.for }}:
      {{`{{ $value | printf "%.0f" }}`}} in the last {{ $a.window }}. Its consumers give them up
      after their last retry; they wait in {{`%DLQ%{{ $labels.group }}`}}.
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeDeadLettersGrowing") }}
{{- end -}}

{{- define "reconsume.alert.deadLetterBacklog" -}}
{{- $a := .Values.alerts.deadLetterBacklog -}}
# Dead letters no dead-letter job has handled, over all brokers of the group's cluster.
- alert: ReconsumeDeadLetterBacklog
  expr: |
    sum by (namespace, reconsume_cluster, group) (reconsume_dead_letter_depth) > {{ $a.max }}
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`'{{ $value | printf "%.0f" }} dead letters of consumer group {{ $labels.group }} wait to be handled'`}}
    description: >-
      {{`%DLQ%{{ $labels.group }} (BrokerCluster {{ $labels.reconsume_cluster }}, namespace
      {{ $labels.namespace }}) holds {{ $value | printf "%.0f" }} dead letters no
      DeadLetterJob has drained, reprocessed or purged, more than`}} {{ $a.max }} for {{ $a.for }}.
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeDeadLetterBacklog") }}
{{- end -}}

{{- define "reconsume.alert.retryStorm" -}}
{{- $a := .Values.alerts.retryStorm -}}
# A large share of what a group consumes is sent back for a retry; groups sending back fewer
# than minSendBacksPerSecond a second never fire (idle groups: 0/0).
- alert: ReconsumeRetryStorm
  expr: |
    (
      sum by (namespace, reconsume_cluster, group) (rate(reconsume_send_back_total[{{ $a.window }}]))
      /
      sum by (namespace, reconsume_cluster, group) (rate(reconsume_messages_out_total[{{ $a.window }}]))
    ) > {{ $a.ratio }}
    and
    sum by (namespace, reconsume_cluster, group) (rate(reconsume_send_back_total[{{ $a.window }}])) > {{ $a.minSendBacksPerSecond }}
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`Consumer group {{ $labels.group }} sends back {{ $value | humanizePercentage }} of the messages it consumes`}}
    description: >-
      For {{ $a.for }} {{`consumer group {{ $labels.group }} (BrokerCluster
      {{ $labels.reconsume_cluster }}, namespace {{ $labels.namespace }}) has sent back
      {{ $value | humanizePercentage }} of the messages it pulled`}} (more than
      {{ mulf $a.ratio 100 }}%, at more than {{ $a.minSendBacksPerSecond }} per second): its
      consumers fail and every failure is another retry to deliver.
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeRetryStorm") }}
{{- end -}}

{{- define "reconsume.alert.scheduleLag" -}}
{{- $a := .Values.alerts.scheduleLag -}}
# Delayed messages (delay levels: retries and delayed sends) are delivered late. No deliveries
# in the window: the quantile is NaN and the alert is silent.
- alert: ReconsumeScheduleLag
  expr: |
    histogram_quantile(0.99, rate(reconsume_schedule_lateness_seconds_bucket[{{ $a.window }}])) > {{ $a.p99Seconds }}
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`Broker {{ $labels.instance }} delivers delayed messages {{ $value | humanizeDuration }} late (p99)`}}
    description: >-
      For {{ $a.for }} {{`the broker {{ $labels.instance }}{{ with $labels.pod }} (pod {{ . }}){{ end }}
      has delivered 1% of its delayed messages (retries and delayed sends) more than
      {{ $value | humanizeDuration }} after they were due`}}, above the threshold of
      {{ $a.p99Seconds }}s.
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeScheduleLag") }}
{{- end -}}

{{- define "reconsume.alert.scheduleStalled" -}}
{{- $a := .Values.alerts.scheduleStalled -}}
# A delay level has held undelivered messages for the whole window and delivered none: with a
# window longer than the longest level, the messages pending at its start were due within it,
# so the level is stuck (a refused delivery blocks those behind it). A series younger than the
# window (a new broker) does not fire.
- alert: ReconsumeScheduleStalled
  expr: |
    (
      min_over_time(reconsume_schedule_pending[{{ $a.window }}]) > 0
      and
      reconsume_schedule_pending offset {{ $a.window }} > 0
    )
    unless
    increase(reconsume_schedule_delivered_total[{{ $a.window }}]) > 0
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`Broker {{ $labels.instance }} delivers no messages of delay level {{ $labels.level }}`}}
    description: >-
      {{`The broker {{ $labels.instance }}{{ with $labels.pod }} (pod {{ . }}){{ end }} has
      held messages of delay level {{ $labels.level }} for`}} {{ $a.window }} {{`(now
      {{ $value | printf "%.0f" }}) and delivered none of them: retries and delayed sends
      of that level are stuck.`}}
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeScheduleStalled") }}
{{- end -}}

{{- define "reconsume.alert.brokerDown" -}}
{{- $a := .Values.alerts.brokerDown -}}
- alert: ReconsumeBrokerDown
  expr: |
    up{job={{ .Values.alerts.brokerJob | quote }}} == 0
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`Broker {{ $labels.instance }} is down`}}
    description: >-
      {{`Prometheus has not been able to scrape the broker {{ $labels.instance }}{{ with $labels.pod }}
      (pod {{ . }}){{ end }}{{ with $labels.namespace }} in namespace {{ . }}{{ end }}`}} for
      {{ $a.for }}: its HTTP port does not answer, and its clients' sends and pulls probably do
      not either.
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeBrokerDown") }}
{{- end -}}

{{- define "reconsume.alert.brokerNoInSyncReplica" -}}
{{- $a := .Values.alerts.brokerNoInSyncReplica -}}
# A master whose broker name declares replicas (--replicas above 1) has none in sync. Only a
# master exports the in-sync count, so replicas never fire; a broker name declaring no replica
# (--replicas 1, the default) never does either. The value is the brokers declared.
- alert: ReconsumeBrokerNoInSyncReplica
  expr: |
    reconsume_broker_replicas_declared > 1
    and
    reconsume_replication_in_sync_replicas == 0
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`Master {{ $labels.instance }} has no replica in sync`}}
    description: >-
      {{`The master {{ $labels.instance }}{{ with $labels.pod }} (pod {{ . }}){{ end }}{{ with $labels.namespace }}
      in namespace {{ . }}{{ end }} has had none of its replicas in sync for`}} {{ $a.for }}
      {{`though its broker name declares {{ $value | printf "%.0f" }} brokers. Under Sync
      replication its writes are refused (SLAVE_NOT_AVAILABLE) or stored on the master
      alone, and no replica may take over without losing acknowledged messages.`}}
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeBrokerNoInSyncReplica") }}
{{- end -}}

{{- define "reconsume.alert.brokerReplicaLagging" -}}
{{- $a := .Values.alerts.brokerReplicaLagging -}}
# A replica lacks messages the master stored more than maxSeconds ago, or more than
# maxMessages of them (a master reports its replicas, those disconnected included, up to its
# declared --replicas). The label lag says which (both: two alerts).
- alert: ReconsumeBrokerReplicaLagging
  expr: |
    label_replace(reconsume_replica_lag_seconds > {{ $a.maxSeconds }}, "lag", "seconds", "replica", ".*")
    or
    label_replace(reconsume_replica_lag_messages > {{ $a.maxMessages }}, "lag", "messages", "replica", ".*")
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`Replica {{ $labels.replica }} of master {{ $labels.instance }} is {{ if eq $labels.lag "seconds" }}{{ $value | humanizeDuration }}{{ else }}{{ $value | printf "%.0f" }} messages{{ end }} behind`}}
    description: >-
      For {{ $a.for }} {{`the replica {{ $labels.replica }} of the master {{ $labels.instance }}{{ with $labels.pod }}
      (pod {{ . }}){{ end }}{{ with $labels.namespace }} in namespace {{ . }}{{ end }} has lacked`}}
      more than {{ $a.maxMessages }} messages or messages older than {{ $a.maxSeconds }}s
      {{`(now {{ if eq $labels.lag "seconds" }}the oldest is {{ $value | humanizeDuration }}
      old{{ else }}{{ $value | printf "%.0f" }} messages{{ end }}). Until it catches up, a
      failover to it would lose what it lacks.`}}
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeBrokerReplicaLagging") }}
{{- end -}}

{{- define "reconsume.alert.reconcileFailures" -}}
{{- $a := .Values.alerts.reconcileFailures -}}
# Reconciles ending in result="error" (an exception or a retried failure: a name server or
# broker that does not answer, a missing BrokerCluster, an API server refusal). The operator
# retries with backoff (at most operator.backoffMaxSeconds), so a persistent failure keeps the
# window non-zero; a transient one does not last `for`.
- alert: ReconsumeReconcileFailures
  expr: |
    sum by (namespace, kind) (
      increase(reconsume_operator_reconcile_total{job={{ .Values.alerts.operatorJob | quote }},result="error"}[{{ $a.window }}])
    ) > 0
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`The reconsume operator keeps failing to reconcile {{ $labels.kind }} resources`}}
    description: >-
      For {{ $a.for }} {{`reconciles of {{ $labels.kind }} resources by the operator in
      namespace {{ $labels.namespace }} have failed: {{ $value | printf "%.0f" }} in the
      last`}} {{ $a.window }}. The failing resources have Ready=False with the reason.
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeReconcileFailures") }}
{{- end -}}

{{- define "reconsume.alert.deadLetterJobFailed" -}}
{{- $a := .Values.alerts.deadLetterJobFailed -}}
{{- $failed := printf "reconsume_operator_dead_letter_job_runs_total{job=%q,phase=\"Failed\"}" .Values.alerts.operatorJob -}}
# A finished DeadLetterJob run with phase Failed. The operator creates the series on the first
# failed run, so a series that is new within the window counts as well as an increase. The
# metric has no job name: the runbook finds the job.
- alert: ReconsumeDeadLetterJobFailed
  expr: |
    increase({{ $failed }}[{{ $a.window }}]) > 0
    or
    (
      {{ $failed }}
      unless
      {{ $failed }} offset {{ $a.window }}
    )
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: A DeadLetterJob run failed
    description: >-
      {{`{{ $value | printf "%.0f" }} DeadLetterJob run(s) reported by the operator
      {{ $labels.instance }} in namespace {{ $labels.namespace }} failed in the last`}}
      {{ $a.window }}: their dead letters were not handled and stay in the dead-letter queue.
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeDeadLetterJobFailed") }}
{{- end -}}

{{- define "reconsume.alert.requestsRefused" -}}
{{- $a := .Values.alerts.requestsRefused -}}
# Access control refuses a broker's requests at a steady rate, per reason: a client whose
# credentials or permissions no longer match the ACL (a key rotated or revoked before the client
# moved), or something probing the port. A refused client that retries is one series here.
- alert: ReconsumeRequestsRefused
  expr: |
    sum by (namespace, reconsume_cluster, instance, pod, reason) (
      rate(reconsume_acl_refused_requests_total[{{ $a.window }}])
    ) > {{ $a.maxPerSecond }}
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`'Broker {{ $labels.instance }} refuses {{ $value | humanize }} requests a second ({{ $labels.reason }})'`}}
    description: >-
      For {{ $a.for }} {{`the broker {{ $labels.instance }}{{ with $labels.pod }} (pod {{ . }}){{ end }}
      of BrokerCluster {{ $labels.reconsume_cluster }} in namespace {{ $labels.namespace }} has
      refused requests for the reason {{ $labels.reason }} at`}} more than {{ $a.maxPerSecond }}
      a second {{`(now {{ $value | humanize }} a second over the last`}} {{ $a.window }}): a client lacks
      credentials or permissions it needs (a key rotated or revoked, an ACL change), or something
      probes the broker. The broker logs each distinct refusal once, naming the account or the
      peer and the resource.
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeRequestsRefused") }}
{{- end -}}

{{- define "reconsume.alert.aclReloadFailing" -}}
{{- $a := .Values.alerts.aclReloadFailing -}}
# The ACL file changed into one that does not read (a bad edit, an unreadable file): the broker
# keeps enforcing the ACL it read before, until the file changes again and reads. Only brokers
# with access control on export the gauge.
- alert: ReconsumeAclReloadFailing
  expr: |
    reconsume_acl_last_reload_successful == 0
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`'Broker {{ $labels.instance }} enforces an outdated ACL: its ACL file does not read'`}}
    description: >-
      For {{ $a.for }} {{`the broker {{ $labels.instance }}{{ with $labels.pod }} (pod {{ . }}){{ end }}{{ with $labels.namespace }}
      in namespace {{ . }}{{ end }} has not read the last change of its ACL file and enforces
      the ACL it read before: accounts and permissions removed since are still accepted, those
      added are refused. Its log says why (ACL file not reloaded).`}}
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeAclReloadFailing") }}
{{- end -}}

{{- define "reconsume.alert.tlsCertificateReloadFailing" -}}
{{- $a := .Values.alerts.tlsCertificateReloadFailing -}}
# The certificate, key or CA files changed into ones that do not load (a key that does not match
# the certificate, a file half-written): new connections get the previous certificate, until the
# files change again and load. Only brokers with TLS on export the gauge.
- alert: ReconsumeTlsCertificateReloadFailing
  expr: |
    reconsume_tls_certificate_last_reload_successful == 0
  for: {{ $a.for }}
  labels:
    severity: {{ $a.severity }}
  annotations:
    summary: {{`'Broker {{ $labels.instance }} serves an outdated TLS certificate: its new files do not load'`}}
    description: >-
      For {{ $a.for }} {{`the broker {{ $labels.instance }}{{ with $labels.pod }} (pod {{ . }}){{ end }}{{ with $labels.namespace }}
      in namespace {{ . }}{{ end }} has not loaded the last change of its TLS certificate files
      and gives new connections the previous certificate: it expires on its own date, and
      clients that trust only a new CA are refused. Its log says why (TLS files changed but do
      not load).`}}
    runbook_url: {{ include "reconsume.runbook" (list . "ReconsumeTlsCertificateReloadFailing") }}
{{- end -}}

{{- /* groups: one per subject; a group whose alerts are all disabled is left out. */ -}}
{{- define "reconsume.alertGroups" -}}
{{- $groups := list
      (list "reconsume.dead-letters" (list "deadLettersGrowing" "deadLetterBacklog"))
      (list "reconsume.retries" (list "retryStorm"))
      (list "reconsume.schedule" (list "scheduleLag" "scheduleStalled"))
      (list "reconsume.brokers" (list "brokerDown"))
      (list "reconsume.replication" (list "brokerNoInSyncReplica" "brokerReplicaLagging"))
      (list "reconsume.operator" (list "reconcileFailures" "deadLetterJobFailed"))
      (list "reconsume.security" (list "requestsRefused" "aclReloadFailing" "tlsCertificateReloadFailing")) -}}
groups:
{{- range $groups }}
{{- $enabled := list }}
{{- range (index . 1) }}
{{- if (index $.Values.alerts .).enabled }}
{{- $enabled = append $enabled . }}
{{- end }}
{{- end }}
{{- if $enabled }}
  - name: {{ index . 0 }}
    rules:
    {{- range $enabled }}
      {{- include (printf "reconsume.alert.%s" .) $ | nindent 6 }}
    {{- end }}
{{- end }}
{{- end }}
{{- end -}}
