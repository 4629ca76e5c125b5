// Package contracts holds what every contract walletsaga has with an outside party shares,
// as tests over all of their clients at once: the payment gateway's and the merchant's
// adapters (internal/provider) and the SMS webhook sender (internal/notify/senders).
//
// One rule so far, one meaning of 409 (docs/API.md, "One meaning of 409"): a provider
// answers 409 only to a key whose call is known and not finished, so a client reads it as
// "in progress: ask again later, under the same key", never as success and never as a
// final failure. A key whose call finished is answered with the first answer again.
package contracts
