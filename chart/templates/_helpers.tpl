{{/* Chart name, truncated to the 63 characters a label allows. */}}
{{- define "switchboard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: the release name, prefixed to the chart name unless it
already contains it. Kept to 52 characters so "-worker"/"-migrate" suffixes fit in 63.
*/}}
{{- define "switchboard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "switchboard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels shared by every object. */}}
{{- define "switchboard.labels" -}}
helm.sh/chart: {{ include "switchboard.chart" . }}
{{ include "switchboard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: switchboard
{{- end }}

{{- define "switchboard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchboard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of one component (web, worker, migrate): pass (dict "ctx" $ "component" "web"). */}}
{{- define "switchboard.componentLabels" -}}
{{ include "switchboard.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "switchboard.componentSelectorLabels" -}}
{{ include "switchboard.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "switchboard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The web and worker pods' ServiceAccount: created (default <fullname>), given, or "" (the namespace's default). */}}
{{- define "switchboard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "switchboard.fullname" .) }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The migration hook's ServiceAccount. A pre-install hook runs before the release's own
resources exist, so with serviceAccount.create it gets a hook-scoped account (weight -10,
like its Secret) that Helm deletes once the hooks succeed; otherwise the pods' account.
*/}}
{{- define "switchboard.migrateServiceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- printf "%s-migrate" (include "switchboard.fullname" .) }}
{{- else }}
{{- .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Name of the Secret holding DATABASE_URL and the JWT and cluster secrets. */}}
{{- define "switchboard.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else }}
{{- include "switchboard.fullname" . }}
{{- end }}
{{- end }}

{{/*
The Secret the migration hook reads. A pre-install hook runs before the release's own
resources exist, so it cannot use the chart-managed Secret: the chart renders a
hook-scoped copy (weight -10, before the Job's 0) that Helm deletes once the hooks
succeed. `switchboard migrate` loads the full configuration, so the copy holds every key.
*/}}
{{- define "switchboard.migrateSecretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else }}
{{- printf "%s-migrate" (include "switchboard.fullname" .) }}
{{- end }}
{{- end }}

{{/*
Data of the chart-managed Secret as base64 values; pass the root context. Empty JWT and
cluster secrets are taken from the live Secret (kept across upgrades) or generated.
Resolved once per render and memoized on the root context, so the release Secret, its
hook-scoped copy and the pods' checksum all see the same generated values.
*/}}
{{- define "switchboard.secretData" -}}
{{- if not (hasKey . "switchboardSecretData") }}
{{- $keys := .Values.secret.keys }}
{{- $live := get (lookup "v1" "Secret" .Release.Namespace (include "switchboard.fullname" .) | default dict) "data" | default dict }}
{{- $data := dict }}
{{- if not .Values.cnpg.enabled }}
{{- $_ := set $data $keys.databaseURL (include "switchboard.databaseURL" . | b64enc) }}
{{- end }}
{{- $_ := set $data $keys.jwtSecret (.Values.secret.jwtSecret | b64enc | default (get $live $keys.jwtSecret) | default (randAlphaNum 64 | b64enc)) }}
{{- $_ := set $data $keys.clusterSecret (.Values.secret.clusterSecret | b64enc | default (get $live $keys.clusterSecret) | default (randAlphaNum 64 | b64enc)) }}
{{- $_ := set . "switchboardSecretData" $data }}
{{- end }}
{{- toYaml (get . "switchboardSecretData") }}
{{- end }}

{{- define "switchboard.databaseURL" -}}
{{- required "secret.databaseURL is required (postgres://...), or set secret.existingSecret to a Secret holding DATABASE_URL" .Values.secret.databaseURL }}
{{- end }}

{{/* preStop + shutdown + margin, or the explicit value after checking it is long enough. */}}
{{- define "switchboard.terminationGracePeriodSeconds" -}}
{{- $drain := add (int .Values.drain.preStopSeconds) (int .Values.drain.shutdownTimeoutSeconds) }}
{{- $grace := int .Values.drain.terminationGracePeriodSeconds }}
{{- if eq $grace 0 }}
{{- add $drain 10 }}
{{- else if le $grace $drain }}
{{- fail (printf "drain.terminationGracePeriodSeconds (%d) must exceed drain.preStopSeconds + drain.shutdownTimeoutSeconds (%d): the kubelet would kill pods mid-drain" $grace $drain) }}
{{- else }}
{{- $grace }}
{{- end }}
{{- end }}

{{/* Roles of the web pool: it takes the worker role too when there is no worker pool. */}}
{{- define "switchboard.webRoles" -}}
{{- if .Values.worker.enabled }}web{{ else }}web,worker{{ end }}
{{- end }}

{{/* Environment of web and worker containers: pass (dict "ctx" $ "roles" "web"). */}}
{{- define "switchboard.env" -}}
{{- $ := .ctx }}
- name: SWITCHBOARD_ROLES
  value: {{ .roles | quote }}
- name: SWITCHBOARD_HTTP_ADDR
  value: {{ printf ":%d" (int $.Values.containerPort) | quote }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
# Other nodes call this pod directly (cluster status, fan-out); must follow POD_IP.
- name: SWITCHBOARD_ADVERTISE_ADDR
  value: {{ printf "$(POD_IP):%d" (int $.Values.containerPort) | quote }}
- name: SWITCHBOARD_SHUTDOWN_TIMEOUT
  value: {{ printf "%ds" (int $.Values.drain.shutdownTimeoutSeconds) | quote }}
{{- with $.Values.config }}
{{- if .logFormat }}
- name: SWITCHBOARD_LOG_FORMAT
  value: {{ .logFormat | quote }}
{{- end }}
{{- if .trustedProxies }}
- name: SWITCHBOARD_TRUSTED_PROXIES
  value: {{ .trustedProxies | quote }}
{{- if .clientIPHeader }}
- name: SWITCHBOARD_CLIENT_IP_HEADER
  value: {{ .clientIPHeader | quote }}
{{- end }}
{{- end }}
{{- if ne (toString .authRate) "" }}
- name: SWITCHBOARD_AUTH_RATE
  value: {{ .authRate | toString | quote }}
{{- end }}
{{- if ne (toString .authBurst) "" }}
- name: SWITCHBOARD_AUTH_BURST
  value: {{ .authBurst | toString | quote }}
{{- end }}
{{- if .webhookAllowPrivate }}
- name: SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE
  value: "true"
{{- end }}
{{- end }}
{{ include "switchboard.secretEnv" (dict "ctx" $ "name" (include "switchboard.secretName" $)) }}
{{- with $.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Secret-backed env: pass (dict "ctx" $ "name" secretName), plus "direct" true for the
migration Job. With cnpg.enabled the database URLs come from the CloudNativePG app Secret
instead (switchboard.cnpgEnv).
*/}}
{{- define "switchboard.secretEnv" -}}
{{- $keys := .ctx.Values.secret.keys -}}
{{- if .ctx.Values.cnpg.enabled }}
{{- include "switchboard.cnpgEnv" . | trim }}
{{- else }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ $keys.databaseURL }}
{{- end }}
- name: SWITCHBOARD_JWT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ $keys.jwtSecret }}
- name: SWITCHBOARD_CLUSTER_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .name }}
      key: {{ $keys.clusterSecret }}
{{- end }}

{{/* Default affinity: spread a component's pods across nodes, preferred (not required). */}}
{{- define "switchboard.affinity" -}}
{{- $pool := index .ctx.Values .component }}
{{- if $pool.affinity }}
{{- toYaml $pool.affinity }}
{{- else }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "switchboard.componentSelectorLabels" . | nindent 12 }}
{{- end }}
{{- end }}

{{/* Pod spec parts shared by web and worker: pass (dict "ctx" $ "component" "web" "roles" "web"). */}}
{{- define "switchboard.podSpec" -}}
{{- $ := .ctx }}
{{- $pool := index $.Values .component }}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "switchboard.serviceAccountName" $ }}
serviceAccountName: {{ . }}
{{- end }}
automountServiceAccountToken: false
enableServiceLinks: false
{{- with $pool.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
terminationGracePeriodSeconds: {{ include "switchboard.terminationGracePeriodSeconds" $ }}
securityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
affinity:
  {{- include "switchboard.affinity" . | trim | nindent 2 }}
{{- with $pool.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $pool.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $pool.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: switchboard
    image: {{ include "switchboard.image" $ | quote }}
    imagePullPolicy: {{ $.Values.image.pullPolicy }}
    args: ["serve"]
    ports:
      - name: http
        containerPort: {{ $.Values.containerPort }}
        protocol: TCP
    env:
      {{- include "switchboard.env" . | trim | nindent 6 }}
    {{- with $.Values.extraEnvFrom }}
    envFrom:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    startupProbe:
      httpGet:
        path: /healthz/live
        port: http
      {{- toYaml $.Values.probes.startup | nindent 6 }}
    readinessProbe:
      httpGet:
        path: /healthz/ready
        port: http
      {{- toYaml $.Values.probes.readiness | nindent 6 }}
    livenessProbe:
      httpGet:
        path: /healthz/live
        port: http
      {{- toYaml $.Values.probes.liveness | nindent 6 }}
    {{- if gt (int $.Values.drain.preStopSeconds) 0 }}
    lifecycle:
      preStop:
        sleep:
          seconds: {{ $.Values.drain.preStopSeconds }}
    {{- end }}
    resources:
      {{- toYaml $pool.resources | nindent 6 }}
    securityContext:
      {{- toYaml $.Values.securityContext | nindent 6 }}
    volumeMounts:
      - name: tmp
        mountPath: /tmp
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: {{ $.Values.tmpSizeLimit }}
{{- end }}

{{/* Pod template annotations: roll pods when the chart-managed Secret's inputs change. */}}
{{- define "switchboard.podAnnotations" -}}
{{- $ := .ctx }}
{{- $pool := index $.Values .component }}
{{- if not $.Values.secret.existingSecret }}
checksum/secret: {{ include "switchboard.secretData" $ | sha256sum }}
{{- end }}
{{- with $pool.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Name of the CloudNativePG Cluster (CloudNativePG allows at most 50 characters). */}}
{{- define "switchboard.cnpgClusterName" -}}
{{- .Values.cnpg.clusterName | default (printf "%s-db" (include "switchboard.fullname" . | trunc 47 | trimSuffix "-")) }}
{{- end }}

{{/* Name of the Pooler, which is also the name of its Service. */}}
{{- define "switchboard.cnpgPoolerName" -}}
{{- printf "%s-pooler" (include "switchboard.cnpgClusterName" .) }}
{{- end }}

{{/* The Secret CloudNativePG generates for the database owner: username, password, uri, ... */}}
{{- define "switchboard.cnpgAppSecret" -}}
{{- printf "%s-app" (include "switchboard.cnpgClusterName" .) }}
{{- end }}

{{/*
Database env with cnpg.enabled: pass (dict "ctx" $ "direct" bool).
- DATABASE_URL goes through the Pooler's Service (PgBouncer, transaction mode), built from
  the app Secret's password (CloudNativePG generates an alphanumeric one, so it needs no
  escaping); "direct" (the migration Job: goose holds a session advisory lock) uses the
  Secret's uri, which names the Cluster's -rw Service.
- SWITCHBOARD_LISTEN_DATABASE_URL: LISTEN needs a session, so the bus and River's notifier
  connect to the -rw Service directly (the Secret's uri).
*/}}
{{- define "switchboard.cnpgEnv" -}}
{{- $ := .ctx }}
{{- $secret := include "switchboard.cnpgAppSecret" $ }}
{{- if get . "direct" }}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: uri
{{- else }}
- name: CNPG_APP_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: password
- name: DATABASE_URL
  value: {{ printf "postgresql://%s:$(CNPG_APP_PASSWORD)@%s.%s:5432/%s?sslmode=require" $.Values.cnpg.owner (include "switchboard.cnpgPoolerName" $) $.Release.Namespace $.Values.cnpg.database | quote }}
- name: SWITCHBOARD_DATABASE_POOLING
  value: transaction
- name: SWITCHBOARD_LISTEN_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: uri
{{- end }}
{{- end }}

{{/* Hook phases of the migration Job: with cnpg.enabled the database is a release object, created after pre-install hooks. */}}
{{- define "switchboard.migrateHook" -}}
{{- if .Values.cnpg.enabled }}post-install,pre-upgrade{{ else }}pre-install,pre-upgrade{{ end }}
{{- end }}

{{/* Name of the Barman Cloud ObjectStore and the ScheduledBackup (cnpg.backup). */}}
{{- define "switchboard.cnpgBackupName" -}}
{{- printf "%s-backup" (include "switchboard.cnpgClusterName" .) }}
{{- end }}

{{/*
The ObjectStore's spec.configuration credentials for cnpg.backup.objectStore: a reference
per key of the user's existing Secret, or the pods' own identity (inheritCredentials).
*/}}
{{- define "switchboard.cnpgBackupCredentials" -}}
{{- $os := .Values.cnpg.backup.objectStore -}}
{{- $secret := $os.secretName -}}
{{- if and (not $os.inheritCredentials) (not $secret) }}
{{- fail "cnpg.backup.objectStore.secretName is required: name an existing Secret in the release namespace holding the object store's credentials (see cnpg.backup.objectStore.s3/google/azure for its keys), or set cnpg.backup.objectStore.inheritCredentials" }}
{{- end }}
{{- if eq $os.provider "s3" }}
s3Credentials:
  {{- if $os.inheritCredentials }}
  inheritFromIAMRole: true
  {{- else }}
  accessKeyId: {name: {{ $secret }}, key: {{ required "cnpg.backup.objectStore.s3.accessKeyIdKey is required" $os.s3.accessKeyIdKey | quote }}}
  secretAccessKey: {name: {{ $secret }}, key: {{ required "cnpg.backup.objectStore.s3.secretAccessKeyKey is required" $os.s3.secretAccessKeyKey | quote }}}
  {{- with $os.s3.sessionTokenKey }}
  sessionToken: {name: {{ $secret }}, key: {{ . | quote }}}
  {{- end }}
  {{- end }}
  {{- with $os.s3.regionKey }}
  region: {name: {{ $secret | required "cnpg.backup.objectStore.s3.regionKey names a key of cnpg.backup.objectStore.secretName, which is empty" }}, key: {{ . | quote }}}
  {{- end }}
{{- else if eq $os.provider "google" }}
googleCredentials:
  {{- if $os.inheritCredentials }}
  gkeEnvironment: true
  {{- else }}
  applicationCredentials: {name: {{ $secret }}, key: {{ required "cnpg.backup.objectStore.google.applicationCredentialsKey is required" $os.google.applicationCredentialsKey | quote }}}
  {{- end }}
{{- else if eq $os.provider "azure" }}
azureCredentials:
  {{- if $os.inheritCredentials }}
  inheritFromAzureAD: true
  {{- else if $os.azure.connectionStringKey }}
  connectionString: {name: {{ $secret }}, key: {{ $os.azure.connectionStringKey | quote }}}
  {{- else }}
  storageAccount: {name: {{ $secret }}, key: {{ required "cnpg.backup.objectStore.azure needs connectionStringKey, or storageAccountKey with storageKeyKey or storageSasTokenKey" $os.azure.storageAccountKey | quote }}}
  {{- if $os.azure.storageSasTokenKey }}
  storageSasToken: {name: {{ $secret }}, key: {{ $os.azure.storageSasTokenKey | quote }}}
  {{- else }}
  storageKey: {name: {{ $secret }}, key: {{ required "cnpg.backup.objectStore.azure needs storageKeyKey or storageSasTokenKey with storageAccountKey" $os.azure.storageKeyKey | quote }}}
  {{- end }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
cnpg.recovery needs cnpg.backup's ObjectStore (the bucket and its credentials) and must not
archive into the folder it recovers from.
*/}}
{{- define "switchboard.cnpgRecoveryCheck" -}}
{{- $c := .Values.cnpg }}
{{- if not $c.backup.enabled }}
{{- fail "cnpg.recovery.enabled recovers from cnpg.backup's object store: set cnpg.backup (enabled, objectStore) to the bucket the backups are in" }}
{{- end }}
{{- $from := required "cnpg.recovery.serverName is required: the folder in the object store to recover from, the old Cluster's name or its cnpg.backup.serverName" $c.recovery.serverName }}
{{- $to := $c.backup.serverName | default (include "switchboard.cnpgClusterName" .) }}
{{- if eq $from $to }}
{{- fail (printf "cnpg.recovery.serverName and the recovered Cluster's archive folder are both %q: the plugin refuses to archive into a folder holding another timeline; set cnpg.backup.serverName to a new one, e.g. %s-r1" $from $from) }}
{{- end }}
{{- end }}
