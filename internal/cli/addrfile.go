// HTTP_ADDR_FILE: the address a server bound, for whoever started it.

package cli

import (
	"fmt"
	"net"
	"os"
)

// WriteAddrFile writes addr and a newline to path, whole or not at all (a temporary file
// renamed over it), for HTTP_ADDR_FILE: a program told to listen on port 0 tells whoever
// started it which port it got. An empty path writes nothing.
func WriteAddrFile(path string, addr net.Addr) error {
	if path == "" {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr.String()+"\n"), 0o600); err != nil {
		return fmt.Errorf("HTTP_ADDR_FILE: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("HTTP_ADDR_FILE: %w", err)
	}
	return nil
}
