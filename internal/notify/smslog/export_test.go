package smslog

// Queries are the read statements behind the console's lists, by name, for the plan test.
var Queries = map[string]string{
	"activity": activitySQL, "user_ids": userIDsSQL, "user_ids_by_phone": userIDsByPhoneSQL, "users": usersSQL,
	"user_sms": userSMSSQL, "dead_letters": deadLettersSQL, "bad_messages": badMessagesSQL, "audit": auditSQL,
	"changes": changesSQL,
}
