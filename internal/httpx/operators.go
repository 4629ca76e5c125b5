// Operators: who may act on the operator endpoints, each with a token of their own.

package httpx

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// DigestPrefix starts a token's digest as an operator list writes it: sha256:<64 hex digits>.
const DigestPrefix = "sha256:"

// MaxOperatorNameLen bounds an operator's name, in bytes (it is the actor of audit rows).
const MaxOperatorNameLen = 64

// Operators are the people who may act on a service's operator endpoints: each one's name
// and the SHA-256 digest of the bearer token that is theirs alone. The token presented
// selects the name, which is the actor of every audit row the action writes; nothing the
// caller types names anyone. The zero value has no operator: the endpoints are disabled.
//
// Only digests are kept (and configured): the list names who may act without holding a
// credential, so a leaked configuration, backup or support bundle lets no one act. The
// tokens are random values (openssl rand -base64 32), where a plain SHA-256 is as good as a
// slow password hash: there is no dictionary to try.
type Operators struct {
	list []operator
}

type operator struct {
	name   string
	digest [sha256.Size]byte
}

// OperatorEntry is the line of an operator list that gives name the token token:
// name:sha256:<hex of SHA-256(token)>. For tests and tools; the list itself never needs
// the token.
func OperatorEntry(name, token string) string {
	sum := sha256.Sum256([]byte(token))
	return name + ":" + DigestPrefix + hex.EncodeToString(sum[:])
}

// ParseOperators reads an operator list: entries name:sha256:<64 hex digits>, separated by
// new lines, commas or spaces; a # starts a comment that runs to the end of its line. A name
// is 1–MaxOperatorNameLen letters, digits, '.', '_', '@' or '-'. Two entries may not share
// a name, nor a token (whose actions could not be told apart), and no entry may be the
// digest of an empty token. An error names the entry by its position and never holds a
// digest. A list of no entries parses: the caller decides what it means.
func ParseOperators(text string) (Operators, error) {
	var o Operators
	names := map[string]bool{}
	digests := map[[sha256.Size]byte]string{}
	empty := sha256.Sum256(nil)
	for n, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, entry := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			where := fmt.Sprintf("line %d", n+1)
			name, digest, ok := strings.Cut(entry, ":")
			if !ok {
				return Operators{}, fmt.Errorf("%s: an entry is name:%s<64 hex digits>, got one without a colon", where, DigestPrefix)
			}
			if err := checkOperatorName(name); err != nil {
				return Operators{}, fmt.Errorf("%s: %w", where, err)
			}
			where += " (" + name + ")"
			hexDigits, ok := strings.CutPrefix(digest, DigestPrefix)
			b, err := hex.DecodeString(hexDigits)
			if !ok || err != nil || len(b) != sha256.Size {
				return Operators{}, fmt.Errorf("%s: the token is given as %s<64 hex digits>, its SHA-256 digest (printf %%s \"$TOKEN\" | sha256sum), never as the token itself", where, DigestPrefix)
			}
			var d [sha256.Size]byte
			copy(d[:], b)
			switch {
			case names[name]:
				return Operators{}, fmt.Errorf("%s: %s is listed twice: one entry per operator", where, name)
			case digests[d] != "":
				return Operators{}, fmt.Errorf("%s: has the token of %s: each operator needs a token of their own, or their actions cannot be told apart", where, digests[d])
			case d == empty:
				return Operators{}, fmt.Errorf("%s: is the digest of an empty token", where)
			}
			names[name], digests[d] = true, name
			o.list = append(o.list, operator{name: name, digest: d})
		}
	}
	return o, nil
}

// checkOperatorName accepts 1–MaxOperatorNameLen letters, digits, '.', '_', '@' or '-'.
func checkOperatorName(name string) error {
	if name == "" || len(name) > MaxOperatorNameLen || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r))
	}) >= 0 {
		return fmt.Errorf("an operator's name is 1–%d letters, digits, '.', '_', '@' or '-'", MaxOperatorNameLen)
	}
	return nil
}

// Len is how many operators there are; none disables the operator endpoints.
func (o Operators) Len() int { return len(o.list) }

// Names are the operators' names, in the list's order.
func (o Operators) Names() []string {
	names := make([]string, len(o.list))
	for i, op := range o.list {
		names[i] = op.name
	}
	return names
}

// Identify returns the name of the operator whose token token is. It compares the token's
// digest with every operator's in constant time, whichever matches (as TokenIs does), so
// neither the time taken nor the length of token tells whose it is or how close it came.
func (o Operators) Identify(token string) (name string, ok bool) {
	got := sha256.Sum256([]byte(token))
	match, index := 0, 0
	for i := range o.list {
		eq := subtle.ConstantTimeCompare(o.list[i].digest[:], got[:])
		match |= eq
		index = subtle.ConstantTimeSelect(eq, i, index)
	}
	if match != 1 {
		return "", false
	}
	return o.list[index].name, true
}
