package chart_test

import (
	"strconv"
	"strings"
	"testing"
)

const (
	cnpgBackup   = cnpgCluster + "-backup" // the ObjectStore and the ScheduledBackup
	barmanPlugin = "barman-cloud.cloudnative-pg.io"
)

// assertFields checks dotted paths (list indexes as numbers) of raw against want; a
// want of "<none>" means the field must be absent.
func assertFields(t *testing.T, what string, raw any, want map[string]string) {
	t.Helper()
	for path, w := range want {
		var steps []any
		for _, s := range strings.Split(path, ".") {
			if i, err := strconv.Atoi(s); err == nil {
				steps = append(steps, i)
			} else {
				steps = append(steps, s)
			}
		}
		got := str(raw, steps...)
		if w == "<none>" {
			if dig(raw, steps...) != nil {
				t.Errorf("%s %s = %s, want it absent", what, path, yamlOf(dig(raw, steps...)))
			}
			continue
		}
		if got != w {
			t.Errorf("%s %s = %q, want %q", what, path, got, w)
		}
	}
}

// backupValues is cnpg with backups to destination and objectStore's extra fields (YAML
// flow mapping entries).
func backupValues(destination, objectStore string) string {
	if objectStore != "" {
		objectStore = ", " + objectStore
	}
	return `cnpg: {enabled: true, backup: {enabled: true, objectStore: {destinationPath: "` + destination + `"` + objectStore + `}}}`
}

func TestCloudNativePGBackup(t *testing.T) {
	t.Parallel()

	t.Run("off by default", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "cnpg")...)
		for _, o := range r.custom {
			if o.Kind == "ObjectStore" || o.Kind == "ScheduledBackup" {
				t.Errorf("%s/%s rendered without cnpg.backup.enabled", o.Kind, o.Name)
			}
		}
		if p := dig(getCustom(t, r, "Cluster", cnpgCluster).raw, "spec", "plugins"); p != nil {
			t.Errorf("Cluster plugins = %s without backups", yamlOf(p))
		}
		if !strings.Contains(r.notes, "No backups") {
			t.Errorf("NOTES.txt does not warn that there are no backups:\n%s", r.notes)
		}
	})

	t.Run("WAL archive and daily base backups through the Barman Cloud Plugin", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "cnpg-backup")...)
		// The Cluster archives its WAL through the plugin into the chart's ObjectStore.
		c := getCustom(t, r, "Cluster", cnpgCluster)
		assertFields(t, "Cluster", c.raw, map[string]string{
			"spec.plugins.0.name":                        barmanPlugin,
			"spec.plugins.0.isWALArchiver":               "true",
			"spec.plugins.0.parameters.barmanObjectName": cnpgBackup,
			"spec.plugins.0.parameters.serverName":       "<none>", // the plugin's default: the Cluster's name
			"spec.plugins.1":                             "<none>",
			// Deprecated since CloudNativePG 1.26, removed in 1.32.
			"spec.backup.barmanObjectStore": "<none>",
			"spec.serviceAccountTemplate":   "<none>",
		})
		// The store: where, for how long, and credentials by reference to the user's Secret.
		os := getCustom(t, r, "ObjectStore", cnpgBackup)
		assertFields(t, "ObjectStore", os.raw, map[string]string{
			"spec.retentionPolicy":                                  "30d",
			"spec.configuration.destinationPath":                    "s3://backups/switchboard",
			"spec.configuration.s3Credentials.accessKeyId.name":     "backup-s3",
			"spec.configuration.s3Credentials.accessKeyId.key":      "ACCESS_KEY_ID",
			"spec.configuration.s3Credentials.secretAccessKey.name": "backup-s3",
			"spec.configuration.s3Credentials.secretAccessKey.key":  "ACCESS_SECRET_KEY",
			"spec.configuration.s3Credentials.sessionToken":         "<none>",
			"spec.configuration.s3Credentials.region":               "<none>",
			"spec.configuration.s3Credentials.inheritFromIAMRole":   "<none>",
			"spec.configuration.endpointURL":                        "<none>",
			"spec.configuration.wal.compression":                    "gzip",
			"spec.configuration.data.compression":                   "gzip",
			"spec.configuration.wal.encryption":                     "<none>",
		})
		for _, cred := range []string{"googleCredentials", "azureCredentials"} {
			if dig(os.raw, "spec", "configuration", cred) != nil {
				t.Errorf("ObjectStore has %s for provider s3", cred)
			}
		}
		// Base backups daily at 03:00 (six-field cron), the first one right away, owned
		// by the ScheduledBackup so they go with it.
		sb := getCustom(t, r, "ScheduledBackup", cnpgBackup)
		assertFields(t, "ScheduledBackup", sb.raw, map[string]string{
			"spec.cluster.name":             cnpgCluster,
			"spec.schedule":                 "0 0 3 * * *",
			"spec.immediate":                "true",
			"spec.backupOwnerReference":     "self",
			"spec.method":                   "plugin",
			"spec.pluginConfiguration.name": barmanPlugin,
			"spec.target":                   "prefer-standby",
		})
		for _, want := range []string{"get objectstore " + cnpgBackup, "s3://backups/switchboard", "retention 30d"} {
			if !strings.Contains(r.notes, want) {
				t.Errorf("NOTES.txt does not mention %q:\n%s", want, r.notes)
			}
		}
		if strings.Contains(r.notes, "No backups") {
			t.Errorf("NOTES.txt says no backups with backups on:\n%s", r.notes)
		}
		for _, o := range []customObject{os, sb} {
			if o.Labels["app.kubernetes.io/component"] != "database" {
				t.Errorf("%s/%s component label = %q", o.Kind, o.Name, o.Labels["app.kubernetes.io/component"])
			}
		}
	})

	t.Run("values reach the objects", func(t *testing.T) {
		t.Parallel()
		r := render(t, scenarioValues(t, "cnpg-backup-everything")...)
		assertFields(t, "Cluster", getCustom(t, r, "Cluster", "sbdb").raw, map[string]string{
			"spec.plugins.0.parameters.barmanObjectName": "sbdb-backup",
			"spec.plugins.0.parameters.serverName":       "sbdb-2",
		})
		assertFields(t, "ObjectStore", getCustom(t, r, "ObjectStore", "sbdb-backup").raw, map[string]string{
			"spec.retentionPolicy":                                     "8w",
			"spec.configuration.destinationPath":                       "s3://backups/sb",
			"spec.configuration.endpointURL":                           "https://minio.storage.svc:9000",
			"spec.configuration.endpointCA.name":                       "minio-ca",
			"spec.configuration.endpointCA.key":                        "root.pem",
			"spec.configuration.s3Credentials.accessKeyId.name":        "minio-creds",
			"spec.configuration.s3Credentials.accessKeyId.key":         "user",
			"spec.configuration.s3Credentials.secretAccessKey.key":     "password",
			"spec.configuration.s3Credentials.sessionToken.name":       "minio-creds",
			"spec.configuration.s3Credentials.sessionToken.key":        "token",
			"spec.configuration.s3Credentials.region.name":             "minio-creds",
			"spec.configuration.s3Credentials.region.key":              "region",
			"spec.configuration.wal.compression":                       "zstd",
			"spec.configuration.wal.maxParallel":                       "8",
			"spec.configuration.wal.encryption":                        "AES256",
			"spec.configuration.data.compression":                      "lz4",
			"spec.configuration.data.jobs":                             "4",
			"spec.configuration.data.encryption":                       "AES256",
			"spec.instanceSidecarConfiguration.resources.requests.cpu": "50m",
		})
		assertFields(t, "ScheduledBackup", getCustom(t, r, "ScheduledBackup", "sbdb-backup").raw, map[string]string{
			"spec.cluster.name": "sbdb",
			"spec.schedule":     "@every 6h",
			"spec.immediate":    "false",
			"spec.target":       "primary",
		})
	})

	t.Run("providers and credentials", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, values string
			want         map[string]string
		}{
			{"google service account key", backupValues("gs://backups/sb", `provider: google, secretName: gcs`), map[string]string{
				"googleCredentials.applicationCredentials.name": "gcs",
				"googleCredentials.applicationCredentials.key":  "application_credentials.json",
				"googleCredentials.gkeEnvironment":              "<none>",
				"s3Credentials":                                 "<none>",
			}},
			{"azure storage account and key", backupValues("https://acct.blob.core.windows.net/backups/sb", `provider: azure, secretName: az`), map[string]string{
				"azureCredentials.storageAccount.name": "az",
				"azureCredentials.storageAccount.key":  "AZURE_STORAGE_ACCOUNT",
				"azureCredentials.storageKey.key":      "AZURE_STORAGE_KEY",
				"azureCredentials.storageSasToken":     "<none>",
				"azureCredentials.connectionString":    "<none>",
			}},
			{"azure SAS token", backupValues("https://acct.blob.core.windows.net/backups/sb", `provider: azure, secretName: az, azure: {storageSasTokenKey: sas}`), map[string]string{
				"azureCredentials.storageAccount.key":  "AZURE_STORAGE_ACCOUNT",
				"azureCredentials.storageSasToken.key": "sas",
				"azureCredentials.storageKey":          "<none>",
			}},
			{"azure connection string", backupValues("https://acct.blob.core.windows.net/backups/sb", `provider: azure, secretName: az, azure: {connectionStringKey: conn}`), map[string]string{
				"azureCredentials.connectionString.name": "az",
				"azureCredentials.connectionString.key":  "conn",
				"azureCredentials.storageAccount":        "<none>",
			}},
			{"s3 IAM role", backupValues("s3://backups/sb", `inheritCredentials: true`), map[string]string{
				"s3Credentials.inheritFromIAMRole": "true",
				"s3Credentials.accessKeyId":        "<none>",
				"s3Credentials.secretAccessKey":    "<none>",
			}},
			{"GKE workload identity", backupValues("gs://backups/sb", `provider: google, inheritCredentials: true`), map[string]string{
				"googleCredentials.gkeEnvironment":         "true",
				"googleCredentials.applicationCredentials": "<none>",
			}},
			{"Azure AD", backupValues("https://acct.blob.core.windows.net/backups/sb", `provider: azure, inheritCredentials: true`), map[string]string{
				"azureCredentials.inheritFromAzureAD": "true",
				"azureCredentials.storageAccount":     "<none>",
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := render(t, tc.values)
				assertFields(t, "ObjectStore spec.configuration", dig(getCustom(t, r, "ObjectStore", cnpgBackup).raw, "spec", "configuration"), tc.want)
			})
		}
	})

	t.Run("pod identity annotates the Cluster's service account", func(t *testing.T) {
		t.Parallel()
		r := render(t, backupValues("s3://backups/sb",
			`inheritCredentials: true, serviceAccountAnnotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/sb-backup"}`))
		got := str(getCustom(t, r, "Cluster", cnpgCluster).raw, "spec", "serviceAccountTemplate", "metadata", "annotations", "eks.amazonaws.com/role-arn")
		if got != "arn:aws:iam::123456789012:role/sb-backup" {
			t.Errorf("Cluster serviceAccountTemplate role-arn = %q", got)
		}
	})

	t.Run("point-in-time recovery from the backups", func(t *testing.T) {
		t.Parallel()
		r := render(t, `
cnpg:
  enabled: true
  backup: {enabled: true, serverName: `+cnpgCluster+`-r1, objectStore: {destinationPath: "s3://backups/sb", secretName: s3}}
  recovery: {enabled: true, serverName: `+cnpgCluster+`, targetTime: "2026-12-01 13:45:00+00"}`)
		assertFields(t, "Cluster", getCustom(t, r, "Cluster", cnpgCluster).raw, map[string]string{
			"spec.bootstrap.initdb":                                      "<none>",
			"spec.bootstrap.recovery.source":                             "origin",
			"spec.bootstrap.recovery.database":                           "switchboard",
			"spec.bootstrap.recovery.owner":                              "switchboard",
			"spec.bootstrap.recovery.recoveryTarget.targetTime":          "2026-12-01 13:45:00+00",
			"spec.bootstrap.recovery.recoveryTarget.backupID":            "<none>",
			"spec.externalClusters.0.name":                               "origin",
			"spec.externalClusters.0.plugin.name":                        barmanPlugin,
			"spec.externalClusters.0.plugin.parameters.barmanObjectName": cnpgBackup,
			"spec.externalClusters.0.plugin.parameters.serverName":       cnpgCluster,
			"spec.externalClusters.1":                                    "<none>",
			// The recovered Cluster archives into a new folder of the same store.
			"spec.plugins.0.parameters.barmanObjectName": cnpgBackup,
			"spec.plugins.0.parameters.serverName":       cnpgCluster + "-r1",
		})
		// Without a target: replay to the end of the archive.
		r = render(t, backupValues("s3://backups/sb", `secretName: s3`), `cnpg: {clusterName: sbdb2, recovery: {enabled: true, serverName: sbdb}}`)
		assertFields(t, "Cluster", getCustom(t, r, "Cluster", "sbdb2").raw, map[string]string{
			"spec.bootstrap.recovery.source":                       "origin",
			"spec.bootstrap.recovery.recoveryTarget":               "<none>",
			"spec.externalClusters.0.plugin.parameters.serverName": "sbdb",
			"spec.plugins.0.parameters.serverName":                 "<none>", // sbdb2, the plugin's default
		})
		// Off: an empty database.
		assertFields(t, "Cluster", getCustom(t, render(t, scenarioValues(t, "cnpg-backup")...), "Cluster", cnpgCluster).raw, map[string]string{
			"spec.bootstrap.initdb.database": "switchboard",
			"spec.bootstrap.recovery":        "<none>",
			"spec.externalClusters":          "<none>",
		})
	})

	t.Run("rejects", func(t *testing.T) {
		t.Parallel()
		const azurePath = "https://acct.blob.core.windows.net/backups/sb"
		for _, tc := range []struct{ name, values, wantErr string }{
			{"backups without the Cluster", withDB + "\n" + `cnpg: {backup: {enabled: true, objectStore: {destinationPath: "s3://b/p", secretName: s}}}`,
				"cnpg.backup.enabled backs up the chart's CloudNativePG Cluster, and cnpg.enabled=false renders none"},
			{"no destination", `cnpg: {enabled: true, backup: {enabled: true, objectStore: {secretName: s}}}`,
				"cnpg.backup.objectStore.destinationPath is required"},
			{"no credentials", backupValues("s3://b/p", ""), "cnpg.backup.objectStore.secretName is required"},
			{"destination of another provider", backupValues("gs://b/p", `secretName: s`),
				`destinationPath "gs://b/p" does not fit provider s3: it must start with s3://`},
			{"azure destination is a URL", backupValues("az://b/p", `provider: azure, secretName: s`),
				"must start with https:// or http://"},
			{"S3 encryption elsewhere", backupValues("gs://b/p", `provider: google, secretName: s, encryption: AES256`),
				"cnpg.backup.objectStore.encryption (AES256) is S3 server-side encryption"},
			{"azure without keys", backupValues(azurePath, `provider: azure, secretName: s, azure: {storageAccountKey: ""}`),
				"cnpg.backup.objectStore.azure needs connectionStringKey"},
			{"azure account without key or token", backupValues(azurePath, `provider: azure, secretName: s, azure: {storageKeyKey: ""}`),
				"cnpg.backup.objectStore.azure needs storageKeyKey or storageSasTokenKey"},
			{"s3 region key without a Secret", backupValues("s3://b/p", `inheritCredentials: true, s3: {regionKey: region}`),
				"cnpg.backup.objectStore.s3.regionKey names a key of cnpg.backup.objectStore.secretName, which is empty"},
			{"five-field cron", `cnpg: {enabled: true, backup: {enabled: true, schedule: "0 3 * * *"}}`, "schedule"},
			{"retention in words", `cnpg: {enabled: true, backup: {enabled: true, retentionPolicy: "30 days"}}`, "retentionPolicy"},
			{"unknown provider", `cnpg: {enabled: true, backup: {enabled: true, objectStore: {provider: minio}}}`, "provider"},
			{"unknown target", `cnpg: {enabled: true, backup: {enabled: true, target: standby}}`, "target"},
			{"keys in values", `cnpg: {enabled: true, backup: {enabled: true, objectStore: {s3: {secretAccessKey: hunter2}}}}`, "secretAccessKey"},
			{"recovery without the object store", `cnpg: {enabled: true, recovery: {enabled: true, serverName: old}}`,
				"cnpg.recovery.enabled recovers from cnpg.backup's object store"},
			{"recovery from nowhere", `cnpg: {enabled: true, backup: {enabled: true, objectStore: {destinationPath: "s3://b/p", secretName: s}}, recovery: {enabled: true}}`,
				"cnpg.recovery.serverName is required"},
			{"recovery into the folder it reads", `cnpg: {enabled: true, backup: {enabled: true, objectStore: {destinationPath: "s3://b/p", secretName: s}}, recovery: {enabled: true, serverName: ` + cnpgCluster + `}}`,
				`cnpg.recovery.serverName and the recovered Cluster's archive folder are both "` + cnpgCluster + `"`},
			{"recovery target in words", `cnpg: {enabled: true, recovery: {enabled: true, targetTime: yesterday}}`, "targetTime"},
			{"compression the base backup lacks", `cnpg: {enabled: true, backup: {enabled: true, objectStore: {data: {compression: zstd}}}}`, "compression"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				if _, err := tryRender(tc.values); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
				}
			})
		}
	})
}
