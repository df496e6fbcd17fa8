//! Real-shaped, fake secrets shared by the redaction tests (`redact.rs`) and
//! the monitor's end-to-end check that none reaches an agent (`monitor.rs`),
//! both R6.6.

/// Real-shaped, fake secrets, and the part of each that must never leak.
pub const SECRETS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY=sk-proj-AbCdEf1234567890GhIjKlMnOpQrStUv", "AbCdEf1234567890"),
    ("using key sk-ant-api03-ZyXwVuTsRqPoNmLk-0987654321abcdEFGH", "ZyXwVuTsRqPoNmLk"),
    ("legacy sk-1234567890abcdefABCDEF1234567890abcdefABCD", "1234567890abcdefABCDEF"),
    ("git remote https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/x/y", "16C7e42F292c6912E7710c"),
    ("GH=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF", "11ABCDEFG0123456789"),
    ("aws_access_key_id AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("slack xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx"),
    ("slack xoxp-1234567890-0987654321-1122334455-abcdef0123456789", "1122334455-abcdef"),
    ("> Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92", "eyJhbGciOiJIUzI1NiJ9"),
    ("curl -H 'authorization: bearer abcdef0123456789xyz'", "abcdef0123456789xyz"),
    ("db password=hunter2! ok", "hunter2!"),
    ("passwd: correct-horse-battery", "correct-horse-battery"),
    ("client secret=s3cr3tValue&x=1", "s3cr3tValue"),
    ("token=tok_9f8e7d6c5b4a", "tok_9f8e7d6c5b4a"),
    ("DATABASE_URL=postgres://admin:Sup3rS3cretPw@db.internal:5432/app", "Sup3rS3cretPw"),
    (r#"{"api_key": "AIzaSyA-1234567890abcdefghijklmnopqrstu"}"#, "AIzaSyA-1234567890"),
    ("mysql --password Pa55w0rdFlag -u root", "Pa55w0rdFlag"),
    ("export STRIPE_KEY=sk_live_51HqLyjWDarjtT1zdp7dc", "51HqLyjWDarjtT1zdp7dc"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nQyNTUxOQAAACDqXmBWf3kP\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    ),
];
