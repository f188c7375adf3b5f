// Package accounts owns the rules on Switchboard's accounts: the one normal
// form of an email address that is stored, made unique and compared.
package accounts
