package chart_test

import (
	"strings"
	"testing"

	"github.com/regent-mq/regent/test/chart"
)

// refused renders the chart with the --set values and checks that helm
// refuses, with every one of the wanted fragments in its message.
func refused(t *testing.T, set []string, want ...string) {
	t.Helper()
	var args []string
	for _, s := range set {
		args = append(args, "--set", s)
	}
	_, err := chart.TemplateErr(args...)
	if err == nil {
		t.Fatalf("helm rendered the chart with %v", set)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal does not say %q:\n%v", w, err)
		}
	}
}

const schemaRefusal = "values don't meet the specifications of the schema"

// values.schema.json: one value at a time.

func TestSchemaRejectsAnUnknownAuthMode(t *testing.T) {
	refused(t, []string{"auth.mode=basic"}, schemaRefusal, "/auth/mode", "'off', 'jwt'")
}

func TestSchemaRejectsAMisspeltValue(t *testing.T) {
	refused(t, []string{"broker.replicas=3"}, schemaRefusal, "/broker", "'replicas' not allowed")
}

func TestSchemaRejectsADatabaseURLThatIsNotPostgreSQL(t *testing.T) {
	refused(t, []string{"database.url=mysql://regent@db/regent"}, schemaRefusal, "/database/url")
}

func TestSchemaRejectsAPoolSmallerThanTwo(t *testing.T) {
	refused(t, []string{"database.poolSize=1"}, schemaRefusal, "/database/poolSize", "want 2")
}

func TestSchemaRejectsADurationWithoutAUnit(t *testing.T) {
	refused(t, []string{"broker.dedupWindow=3600"}, schemaRefusal, "/broker/dedupWindow")
}

func TestSchemaRejectsABodyLimitUnderOneMiB(t *testing.T) {
	refused(t, []string{"broker.maxBodyMiB=0"}, schemaRefusal, "/broker/maxBodyMiB", "got 0, want 1")
}

func TestSchemaRejectsAServicePortOutOfRange(t *testing.T) {
	refused(t, []string{"broker.service.port=70000"}, schemaRefusal, "/broker/service/port")
}

func TestSchemaRejectsAnUnknownLogLevel(t *testing.T) {
	refused(t, []string{"broker.logLevel=verbose"}, schemaRefusal, "/broker/logLevel")
}

func TestSchemaRejectsASecretNameThatIsNotADNSName(t *testing.T) {
	refused(t, []string{"signingSecret.existingSecret.name=My_Secret"}, schemaRefusal, "/signingSecret/existingSecret/name")
}

func TestSchemaRejectsAScrapeIntervalPrometheusCannotParse(t *testing.T) {
	refused(t, []string{"serviceMonitor.enabled=true", "serviceMonitor.interval=1.5m"}, schemaRefusal, "/serviceMonitor/interval")
}

// Rules across values, checked by templates/validate.yaml with messages that
// say what to change.

func TestTenancyWithoutJWTAuthIsRefused(t *testing.T) {
	refused(t, []string{"tenancy.enabled=true", "auth.mode=off"}, "tenancy.enabled=true needs auth.mode=jwt")
}

func TestNoDatabaseIsRefused(t *testing.T) {
	refused(t, []string{"database.url="}, "set database.url", "database.existingSecret.name")
}

func TestADisruptionBudgetWithBothBoundsIsRefused(t *testing.T) {
	refused(t, []string{"broker.podDisruptionBudget.enabled=true", "broker.podDisruptionBudget.maxUnavailable=1"},
		"set exactly one of minAvailable and maxUnavailable")
}

func TestAutoscalingWithMinAboveMaxIsRefused(t *testing.T) {
	refused(t, []string{"broker.autoscaling.enabled=true", "broker.autoscaling.minReplicas=5", "broker.autoscaling.maxReplicas=3"},
		"minReplicas (5) is greater than maxReplicas (3)")
}

func TestRetiredKeysWithoutEncryptionAreRefused(t *testing.T) {
	refused(t, []string{"encryption.existingSecret.oldKeys={old}"}, "oldKeys is set but encryption.enabled is false")
}

func TestRetiredKeysNamingTheCurrentKeyAreRefused(t *testing.T) {
	refused(t, []string{"encryption.enabled=true", "encryption.existingSecret.oldKeys={encryption-key}"},
		`oldKeys names the current key "encryption-key"`)
}
