// Operators: who may act on a service's operator endpoints, each with a token of their own.

package cli

import (
	"os"
	"strings"

	"github.com/walletsaga/walletsaga/internal/httpx"
)

// The settings of a service's operators (see httpx.Operators): OperatorTokensEnv lists them
// inline, OperatorTokensFileEnv names a file that does; RetiredAdminTokenEnv is the one token
// all operators shared before, which no service reads any more.
const (
	OperatorTokensEnv     = "OPERATOR_TOKENS"
	OperatorTokensFileEnv = "OPERATOR_TOKENS_FILE"
	RetiredAdminTokenEnv  = "ADMIN_TOKEN"
)

// operatorSettings are what bindOperators read, for CheckLate.
type operatorSettings struct {
	// field is the setting the list came from (for problems); empty when none is set.
	field string
	// retired names the retired setting the environment still sets, if any.
	retired string
}

// bindOperators binds OPERATOR_TOKENS and OPERATOR_TOKENS_FILE into s.Operators: the list is
// digests and names, no credential, so it may come from a flag, the environment or a file.
// A list that does not parse is a problem; so is one set in both places.
func (s *Service) bindOperators(f *Flags) {
	var inline, file string
	f.String(&inline, OperatorTokensEnv, "", "operators who may call the operator endpoints, each with a token of their own, which names them as the actor of the audit rows: "+
		"entries name:sha256:DIGEST (DIGEST: the SHA-256 of the operator's token, 64 hex digits; never the token itself) separated by commas, or one a line in "+OperatorTokensFileEnv+
		" (neither: the operator endpoints are disabled). "+RetiredAdminTokenEnv+", the one token all operators shared, is no longer read: a service given it refuses to start")
	f.String(&file, OperatorTokensFileEnv, "", "file of the operators (see "+OperatorTokensEnv+"): one name:sha256:DIGEST a line; # starts a comment")
	for _, env := range []string{RetiredAdminTokenEnv, RetiredAdminTokenEnv + "_FILE"} {
		if f.getenv(env) != "" && s.operators.retired == "" {
			s.operators.retired = env
		}
	}
	f.after = append(f.after, func() {
		text := inline
		switch {
		case inline != "" && file != "":
			f.problems.Addf(OperatorTokensEnv, "is set, and so is %s: list the operators in one of them", OperatorTokensFileEnv)
			return
		case inline != "":
			s.operators.field = OperatorTokensEnv
		case file != "":
			s.operators.field = OperatorTokensFileEnv
			b, err := os.ReadFile(file) //nolint:gosec // G304: the operator names the file; reading it is the point
			if err != nil {
				f.problems.Addf(OperatorTokensFileEnv, "%v", err)
				return
			}
			text = string(b)
		default:
			return
		}
		ops, err := httpx.ParseOperators(text)
		switch {
		case err != nil:
			f.problems.Addf(s.operators.field, "%v", err)
		case ops.Len() == 0:
			f.problems.Addf(s.operators.field, "is set but lists no operator: list at least one (name:sha256:<digest of their token>), or leave it unset to disable the operator endpoints")
		default:
			s.Operators = ops
		}
	})
}

// checkOperators adds the problems of s.Operators to p: a retired ADMIN_TOKEN still set
// (when serving: it would silently stop working), and an operator whose token is another
// secret of the binary (secrets), or in production one the repository documents. Only the
// digest of an operator's token is known, so what can be checked is which known values it
// is the digest of: the other secrets exactly, the documented ones in the casings people
// type them in.
func (s Service) checkOperators(p *Problems, serving bool, secrets []NamedSecret) {
	if serving && s.operators.retired != "" {
		p.Addf(s.operators.retired, "is no longer read: one token shared by every operator let whoever held it act under any name. "+
			"Give each operator a token of their own in %s (name:sha256:<digest of the token>; docs/OPERATIONS.md, \"Operator identities\") and unset %s",
			OperatorTokensFileEnv, s.operators.retired)
	}
	if s.Operators.Len() == 0 {
		return
	}
	for _, sec := range secrets {
		if sec.Value == "" || s.Mode == Dev && IsDocumentedSecret(sec.Value) {
			continue
		}
		if name, ok := s.Operators.Identify(sec.Value); ok {
			p.Addf(s.operators.field, "%s's token must differ from %s: one secret for two purposes lets whoever holds it for one act for the other", name, sec.Field)
		}
	}
	if s.Mode != Production {
		return
	}
	for _, v := range DocumentedSecrets {
		for _, typed := range documentedCasings(v) {
			if name, ok := s.Operators.Identify(typed); ok {
				p.Addf(s.operators.field, "%s's token is a secret the repository documents for its dev stack or examples; production needs one of its own (openssl rand -base64 32)", name)
				break
			}
		}
	}
}

// documentedCasings are the spellings of a documented secret (listed in lower case) that
// people type: as listed, in capitals, with each word capitalized, with the first letter
// capitalized. IsDocumentedSecret compares in any case; a digest can only be compared with
// these.
func documentedCasings(v string) []string {
	words := strings.Split(v, "-")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	first := v
	if v != "" {
		first = strings.ToUpper(v[:1]) + v[1:]
	}
	return []string{v, strings.ToUpper(v), strings.Join(words, "-"), first}
}
